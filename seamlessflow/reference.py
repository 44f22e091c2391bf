"""The docs site's configuration and CLI references, rendered as Markdown from the code they describe.

Why generated: each key's help is written once, where the key is defined (an attribute docstring of its
options class), and each command's where the command is; a page written by hand would drift from both.
The configuration comes from `Settings` and `seamlessflow.sections`; the CLI from walking a click group's
own objects. `docs/hooks/reference.py` adds both pages to the site when it is built.
"""

from __future__ import annotations

import enum
import inspect
import json
import types
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import to_jsonable_python

from seamlessflow.config import Settings
from seamlessflow.sections import LIST_SECTIONS, SECTIONS

ROOT = Path(__file__).resolve().parents[1]
REQUIRED = "required"  # a default as JSON is never this bare word

CONFIG_INTRO = """\
Every key of the settings, generated from the options classes that validate them. A process reads the
defaults, then the YAML file given by `--config` (or `SEAMLESSFLOW_CONFIG`), then `SEAMLESSFLOW_*` environment
variables (`__` between levels: `SEAMLESSFLOW_PROXY__PORT=8100` sets `proxy.port`), then its command-line
options, each over the one before. `seamlessflow up` starts from `infra/stack-defaults.yaml`, which turns every
service on. Keys with `<id>` are entries of a mapping named by you; keys with `[]` are items of a list."""

CLI_INTRO = """\
Every command of `{name}`, generated from the click commands themselves. Each option can also be set by the
environment variable shown with it; the global options (and the YAML `--config`) apply to every command."""


@dataclass(frozen=True)
class Key:
    """One row of the configuration reference."""

    name: str
    type: str
    default: str
    help: str


def keys(model: type[BaseModel], prefix: str = "") -> Iterator[Key]:
    """Every key of `model`, depth first: a nested model's keys follow the key that holds it."""
    for name, field in model.model_fields.items():
        key = prefix + name
        yield Key(key, type_name(field.annotation), default_text(field), field.description or "")
        nested, step = _nested(field.annotation)
        if nested is not None:
            yield from keys(nested, f"{key}{step}.")


def _nested(annotation: Any) -> tuple[type[BaseModel] | None, str]:
    """The model a field holds: itself (`.`), as a mapping's values (`.<id>.`) or a list's items (`[].`)."""
    for arg in get_args(annotation) if _is_union(annotation) else (annotation,):
        args = get_args(arg)
        if _is_model(arg):
            return arg, ""
        if get_origin(arg) is dict and _is_model(args[1]):
            return args[1], ".<id>"
        if get_origin(arg) is list and _is_model(args[0]):
            return args[0], "[]"
    return None, ""


def _is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def _is_union(annotation: Any) -> bool:
    return get_origin(annotation) in (Union, types.UnionType)


def type_name(annotation: Any) -> str:
    """A type as a YAML writer reads it: enums and literals by their values, a nested model as `object`."""
    if annotation is type(None):
        return "null"
    if _is_union(annotation):
        return " | ".join(type_name(arg) for arg in get_args(annotation))
    if get_origin(annotation) is Literal:
        return " | ".join(str(value) for value in get_args(annotation))
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(str(member.value) for member in annotation)
    if get_origin(annotation) in (list, dict):
        return f"{get_origin(annotation).__name__}[{', '.join(type_name(arg) for arg in get_args(annotation))}]"
    if _is_model(annotation):
        return "object"
    if annotation is Path:
        return "path"
    return getattr(annotation, "__name__", str(annotation)).replace("Any", "any")


def default_text(field: FieldInfo) -> str:
    """The default as JSON (which YAML reads too); a path inside the checkout relative to it."""
    if field.is_required():
        return REQUIRED
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):
        return ""  # its keys follow, each with its default
    return json.dumps(to_jsonable_python(value)).replace(str(ROOT) + "/", "")


def configuration_markdown() -> str:
    out = ["# Configuration reference", "", CONFIG_INTRO, "", "## Top level", "",
           _prose(_doc(Settings)) or "Shared by every process.", "", *_table(keys(Settings))]
    for section, model in SECTIONS.items():
        prefix = f"{section}[]." if section in LIST_SECTIONS else f"{section}."
        out += ["", f"## `{section}`", ""]
        if _doc(model):
            out += [_prose(_doc(model)), ""]
        out += _table(keys(model, prefix))
    return "\n".join(out) + "\n"


def _table(rows: Iterator[Key]) -> list[str]:
    lines = ["| Key | Type | Default | Help |", "| --- | --- | --- | --- |"]
    for row in rows:
        default = "*required*" if row.default == REQUIRED else f"`{row.default}`" if row.default else ""
        lines.append(f"| `{row.name}` | `{row.type}` | {_cell(default)} | {_cell(_prose(row.help))} |")
    return lines


def _doc(obj: Any) -> str:
    """An object's own docstring (a class's is not inherited), its paragraphs up to a form feed."""
    return inspect.cleandoc(obj.__doc__ or "").split("\f")[0].strip() if "__doc__" in vars(obj) else ""


def _prose(text: str) -> str:
    """Plain text made safe for Markdown outside code spans: `<id>` is not a tag, `*` and `_` no emphasis."""
    parts = text.split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("<", "&lt;").replace(">", "&gt;").replace("*", r"\*").replace("_", r"\_")
    return "`".join(parts)


def _cell(text: str) -> str:
    """Text in a table cell: on one line, its pipes escaped outside code spans."""
    parts = " ".join(text.split()).split("`")
    for i in range(0, len(parts), 2):
        parts[i] = parts[i].replace("|", r"\|")
    return "`".join(parts)


def cli_markdown(group: click.Group, name: str) -> str:
    """Every command of `group` (called `name`), depth first, with its usage, help and options."""
    root = click.Context(group, info_name=name, **group.context_settings)
    out = ["# CLI reference", "", CLI_INTRO.format(name=name)]
    for ctx in commands(root):
        command = ctx.command
        usage = " ".join([ctx.command_path, *command.collect_usage_pieces(ctx)])
        out += ["", f"## `{ctx.command_path}`", "", "```text", f"Usage: {usage}", "```"]
        if command.help:
            out += ["", *_help_paragraphs(command.help)]
        out += ["", *_options_table(ctx)]
    return "\n".join(out) + "\n"


def commands(ctx: click.Context) -> Iterator[click.Context]:
    """`ctx` and a context for every command under it that is not hidden, depth first, in listed order."""
    yield ctx
    group = ctx.command
    if isinstance(group, click.Group):
        for name in group.list_commands(ctx):
            command = group.get_command(ctx, name)
            if command is not None and not command.hidden:
                yield from commands(click.Context(command, info_name=name, parent=ctx))


def _help_paragraphs(help_text: str) -> list[str]:
    """Click's help: paragraphs rewrapped as prose, a `\\b` paragraph kept as it is written."""
    out: list[str] = []
    for paragraph in inspect.cleandoc(help_text).split("\f")[0].split("\n\n"):
        if paragraph.startswith("\b"):
            out += ["```text", paragraph.removeprefix("\b").strip("\n"), "```", ""]
        else:
            out += [_prose(" ".join(paragraph.split())), ""]
    return out[:-1]


def _options_table(ctx: click.Context) -> list[str]:
    lines = ["| Option | Help |", "| --- | --- |"]
    for param in ctx.command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None or isinstance(param, click.Argument):  # arguments are named in the usage
            continue
        options, help_text = record
        envvar = _envvar(param, ctx)
        help_text = _prose(help_text) + (f" (env: `{envvar}`)" if envvar else "")
        lines.append(f"| `{options}` | {_cell(help_text)} |")
    return lines


def _envvar(param: click.Parameter, ctx: click.Context) -> str | None:
    """The environment variable click reads the option from: its own, else the group's automatic one."""
    if not isinstance(param, click.Option) or not param.expose_value:  # --help is not an input
        return None
    if param.envvar:
        return param.envvar if isinstance(param.envvar, str) else ", ".join(param.envvar)
    if param.allow_from_autoenv and ctx.auto_envvar_prefix and param.name:
        return f"{ctx.auto_envvar_prefix}_{param.name.upper()}"
    return None

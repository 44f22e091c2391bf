"""The section table: every key of every section carries its help, and the table names every section in use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError

from seamlessflow.config import Settings
from seamlessflow.reference import _nested, keys
from seamlessflow.sections import LIST_SECTIONS, SECTIONS
from seamlessflow.stack.options import ServicesOptions
from seamlessflow.stack.services import SERVICES, STACK_DEFAULTS

ROOT = Path(__file__).resolve().parents[1]
SECTION_CALL = re.compile(r"""\.section\(\s*["']([a-z_]+)["']\s*\)""")


def keys_without_help(model: type[BaseModel]) -> list[str]:
    return [key.name for key in keys(model) if not key.help.strip()]


@pytest.mark.parametrize("model", [Settings, *SECTIONS.values()], ids=["settings", *SECTIONS])
def test_every_key_has_help(model):
    assert keys_without_help(model) == []


def test_a_key_without_help_is_found_nested_too():
    class Inner(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=True)

        cpus: str | None = None  # a comment is no help

    class Outer(BaseModel):
        model_config = ConfigDict(use_attribute_docstrings=True)

        port: int = 0
        """Where it listens."""
        workers: dict[str, Inner] = {}
        """By id."""

    assert keys_without_help(Outer) == ["workers.<id>.cpus"]


def test_the_table_names_every_section_of_the_stack_defaults():
    defaults = yaml.safe_load(STACK_DEFAULTS.read_text())
    assert set(defaults) - set(Settings.model_fields) - set(SECTIONS) == set()


def restated_defaults(model: type[BaseModel], data: dict[str, Any], prefix: str = "") -> list[str]:
    """The keys of `data` whose value is `model`'s default for them, depth first into nested models (a model's
    own keys, a mapping's entries, a list's items)."""
    found = []
    for name, value in data.items():
        field, key = model.model_fields.get(name), prefix + name
        if field is None:
            continue
        nested, step = _nested(field.annotation)
        if nested is not None and step == "" and isinstance(value, dict):
            found += restated_defaults(nested, value, key + ".")
        elif nested is not None and step == ".<id>" and isinstance(value, dict):
            found += [k for entry, item in value.items() for k in restated_defaults(nested, item, f"{key}.{entry}.")]
        elif nested is not None and step == "[]" and isinstance(value, list):
            found += [k for i, item in enumerate(value) for k in restated_defaults(nested, item, f"{key}[{i}].")]
        elif not field.is_required() and _validated(field.annotation, value) == field.get_default(
                call_default_factory=True):
            found.append(key)
    return found


def _validated(annotation: Any, value: Any) -> Any:
    try:
        return TypeAdapter(annotation).validate_python(value)
    except ValidationError:
        return value


def test_the_stack_defaults_restate_no_class_default():
    """infra/stack-defaults.yaml holds only what `up` changes: a value equal to its class's default is written
    twice, and the two drift apart the day the class's changes."""
    defaults = yaml.safe_load(STACK_DEFAULTS.read_text())
    restated = restated_defaults(Settings, {k: v for k, v in defaults.items() if k not in SECTIONS})
    for section, model in SECTIONS.items():
        entries = defaults.get(section) or {}
        if section in LIST_SECTIONS:
            entries = {f"{section}[{i}].": item for i, item in enumerate(entries)}
        else:
            entries = {f"{section}.": entries}
        restated += [key for prefix, data in entries.items() for key in restated_defaults(model, data, prefix)]
    assert restated == []


def test_a_restated_default_is_found_nested_too():
    class Worker(BaseModel):
        cpus: str | None = None
        tags: list[str] = ["rollout"]

    class Section(BaseModel):
        port: int = 8100
        rate: float = 1.0
        workers: dict[str, Worker] = {}
        pools: list[Worker] = []

    data = {"port": 8100, "rate": 1, "workers": {"a": {"cpus": "0", "tags": ["rollout"]}},
            "pools": [{"cpus": None}]}
    assert restated_defaults(Section, data, "s.") == ["s.port", "s.rate", "s.workers.a.tags", "s.pools[0].cpus"]


def test_the_table_names_every_section_the_code_reads():
    """Every `settings.section("name")` of the shipped code (a search of the text, nothing imported)."""
    files = [p for folder in ("seamlessflow", "services") for p in (ROOT / folder).rglob("*.py")]
    read = {name for path in files for name in SECTION_CALL.findall(path.read_text())}
    assert read and read - set(SECTIONS) == set()


def test_the_services_section_names_every_service_up_runs():
    assert tuple(ServicesOptions.model_fields) == SERVICES


def test_sections_are_not_settings_fields():
    """A section named like a top-level field would be that field, never the section."""
    assert set(SECTIONS) & set(Settings.model_fields) == set()

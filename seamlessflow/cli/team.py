"""`seamlessflow team add|list|revoke`: API keys that tie agents' requests to a team, and a team's own adapter."""

from __future__ import annotations

from pathlib import Path

import click
import yaml
from rich.console import Console
from rich.table import Table

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.model.choice import configured_model, model_dir
from seamlessflow.model.lora import CONFIG_FILE, DEFAULT_TARGETS, WEIGHTS_FILE, TeamAdapter, write_adapter
from seamlessflow.teams import TeamKeys

ADAPTERS_DIR = "adapters"  # under data_dir: <data_dir>/adapters/<team>


@click.group()
def team() -> None:
    """Team API keys (stored hashed in <data-dir>/teams.json; the proxy re-reads them on change)."""


@team.command("add")
@click.argument("name")
@click.option("--lora", "rank", type=click.IntRange(1, 512),
              help="Also write the team a fresh LoRA adapter of this rank on the base model "
                   "(<data-dir>/adapters/NAME) and print its `proxy.teams` entry.")
@click.option("--lora-targets", default=",".join(DEFAULT_TARGETS), show_default=True,
              help="Comma-separated module names the adapter adapts (with --lora).")
@click.option("--lora-alpha", type=click.FloatRange(min=0, min_open=True),
              help="The adapter's lora_alpha (with --lora; default 2 x rank).")
@click.option("--model", "model_path", type=click.Path(file_okay=False, path_type=Path),
              help="The base model's directory (with --lora; default: the stack's, `rollout.model` or the tiny one).")
@pass_settings
def team_add(settings: Settings, name: str, rank: int | None, lora_targets: str, lora_alpha: float | None,
             model_path: Path | None) -> None:
    """Issue a new key for team NAME; it is printed once and only its hash is kept. With --lora RANK, also write
    the team's adapter, which starts equal to the base (as PEFT starts one), and print the entry that serves it."""
    if not name or any(c in name for c in " ./\\"):
        raise click.BadParameter("team names are non-empty and contain no spaces, dots or slashes", param_hint="NAME")
    entry = None
    if rank is not None:  # before the key: a team whose adapter cannot be written gets no key either
        targets = tuple(t.strip() for t in lora_targets.split(",") if t.strip())
        if not targets:
            raise click.BadParameter("name at least one module", param_hint="--lora-targets")
        entry = write_team_adapter(settings, name, rank, lora_alpha, targets, model_path)
    key = TeamKeys.from_settings(settings).add(name)
    click.echo(key)
    click.echo(f"Key for team {name!r} (shown once; store it now).", err=True)
    if entry is not None:
        click.echo(f"Adapter written to {entry.path}; add this entry under `proxy.teams` in the config (the "
                   "engines start with it and the proxy routes the team's calls to it):", err=True)
        click.echo(yaml.safe_dump({name: {"lora": entry.model_dump()}}, sort_keys=False), nl=False)


def base_model(settings: Settings, given: Path | None) -> Path:
    """The base model's directory: the one given, else the stack's (`rollout.model`, else the tiny model)."""
    path = given or model_dir(settings)
    if (path / "config.json").is_file():
        return path
    if given is not None:
        raise click.ClickException(f"no model in {given} (no config.json)")
    if configured_model(settings):
        raise click.ClickException(f"rollout.model {str(path)!r} is not a local model directory: give --model PATH "
                                   "(its downloaded directory)")
    raise click.ClickException(f"the base model is not there yet ({path}): run `seamlessflow up` once (it builds "
                               "it), or give --model PATH")


def write_team_adapter(settings: Settings, name: str, rank: int, alpha: float | None, targets: tuple[str, ...],
                       given: Path | None) -> TeamAdapter:
    """Writes a fresh adapter for team `name` into <data_dir>/adapters/<name>; its `proxy.teams.<name>.lora`."""
    model = base_model(settings, given)
    out = (Path(settings.data_dir) / ADAPTERS_DIR / name).resolve()
    if (out / WEIGHTS_FILE).exists() or (out / CONFIG_FILE).exists():
        raise click.ClickException(f"team {name!r} already has an adapter in {out}; remove it to start a fresh one")
    try:
        write_adapter(model.resolve(), out, rank, alpha, targets)
    except (FileNotFoundError, ValueError) as exc:
        raise click.ClickException(str(exc)) from exc
    return TeamAdapter(name=f"{name}-lora", path=str(out), rank=rank)


@team.command("list")
@pass_settings
def team_list(settings: Settings) -> None:
    """Teams and how many keys each holds (never the keys)."""
    counts = TeamKeys.from_settings(settings).teams()
    table = Table("team", "keys")
    for name, count in sorted(counts.items()):
        table.add_row(name, str(count))
    Console().print(table)


@team.command("revoke")
@click.argument("name")
@pass_settings
def team_revoke(settings: Settings, name: str) -> None:
    """Revoke every stored key of team NAME (keys from the config file or env must be removed there)."""
    removed = TeamKeys.from_settings(settings).revoke(name)
    if not removed:
        raise click.ClickException(f"team {name!r} has no stored keys")
    click.echo(f"revoked {removed} key(s) of team {name!r}")

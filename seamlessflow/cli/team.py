"""`seamlessflow team add|list|revoke`: API keys that tie agents' requests to a team."""

from __future__ import annotations

import click
from rich.console import Console
from rich.table import Table

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.teams import TeamKeys


@click.group()
def team() -> None:
    """Team API keys (stored hashed in <data-dir>/teams.json; the proxy re-reads them on change)."""


@team.command("add")
@click.argument("name")
@pass_settings
def team_add(settings: Settings, name: str) -> None:
    """Issue a new key for team NAME; it is printed once and only its hash is kept."""
    if not name or any(c in name for c in " ./\\"):
        raise click.BadParameter("team names are non-empty and contain no spaces, dots or slashes", param_hint="NAME")
    key = TeamKeys.from_settings(settings).add(name)
    click.echo(key)
    click.echo(f"Key for team {name!r} (shown once; store it now).", err=True)


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

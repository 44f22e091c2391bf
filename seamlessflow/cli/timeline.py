"""`seamlessflow timeline`: devices x time coloured by account, from the status topic, and the bubble ratio.

Intervals come from seamlessflow.scheduler.role_intervals, one timeline per device; the accounts and the bubble
are the core's (seamlessflow.core.accounting)
and the drawing the simulator's (seamlessflow.sim.timeline_plot), so real and simulated runs are measured the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.core.accounting import ACCOUNTS, account
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.scheduler.role_intervals import device_timeline, role_switches
from seamlessflow.sim.timeline_plot import draw_timeline
from seamlessflow.topics import Topics


@click.command()
@click.option("--out", "out_path", type=click.Path(dir_okay=False), default=None,
              help="PNG to write (default: <data-dir>/timeline.png).")
@click.option("--team", help="Only this team's records (default: the configured team).")
@click.option("--run", "run_name", help="Only this run's records (default: the configured run).")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@pass_settings
def timeline(settings: Settings, out_path: str | None, team: str | None, run_name: str | None,
             as_json: bool) -> None:
    """Draw the run's timeline, one row per device, and print where every device-second went and the bubble."""
    team, run_name = team or settings.team, run_name or settings.run
    messages = [m for m in messages_until(settings, Topics(settings).status, codec_for(settings))
                if m.team == team and m.run == run_name]  # type: ignore[attr-defined]  # status records all carry both
    intervals = device_timeline(messages)
    if not intervals:
        raise click.ClickException(f"no resource status records for team {team!r} run {run_name!r}")
    path = draw_timeline(intervals, Path(out_path) if out_path else Path(settings.data_dir) / "timeline.png",
                         title=f"{team}/{run_name}")
    books = account(intervals)
    figures = {"png": str(path), "bubble_ratio": round(books.bubble, 5), "resources": books.devices,
               "seconds_by_kind": {k: round(v, 3) for k, v in books.seconds.items()},
               "accounts": {ACCOUNTS[k]: round(v, 3) for k, v in books.seconds.items()},
               "role_switches": len(role_switches(messages))}
    if as_json:
        click.echo(json.dumps(figures))
    else:
        click.echo(f"timeline: {path}")
        click.echo("every device-second, each device once (an engine lent to the trainer shows the trainer):")
        click.echo("\n".join(books.lines()))
        click.echo(f"bubble ratio: {books.bubble:.1%} over {books.devices} devices, "
                   f"{figures['role_switches']} role switches")

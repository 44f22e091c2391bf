"""`seamlessflow timeline`: resources x time coloured by role, from the status topic, and the bubble ratio.

Intervals come from seamlessflow.scheduler.role_intervals; the bubble ratio is the core's (seamlessflow.core.timeline)
and the drawing the simulator's (seamlessflow.sim.timeline_plot), so real and simulated runs are measured the same way.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.core.timeline import bubble_ratio, time_by_kind
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.scheduler.role_intervals import intervals_from_records, role_switches
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
    """Draw the role timeline of the run's resources and print the bubble ratio (idle time / total)."""
    team, run_name = team or settings.team, run_name or settings.run
    messages = [m for m in messages_until(settings, Topics(settings).status, codec_for(settings))
                if m.team == team and m.run == run_name]  # type: ignore[attr-defined]  # status records all carry both
    intervals = intervals_from_records(messages)
    if not intervals:
        raise click.ClickException(f"no resource status records for team {team!r} run {run_name!r}")
    path = draw_timeline(intervals, Path(out_path) if out_path else Path(settings.data_dir) / "timeline.png",
                         title=f"{team}/{run_name}")
    ratio = bubble_ratio(intervals)
    figures = {"png": str(path), "bubble_ratio": round(ratio, 5), "resources": len({i.resource_id for i in intervals}),
               "seconds_by_kind": {k: round(v, 3) for k, v in time_by_kind(intervals).items()},
               "role_switches": len(role_switches(messages))}
    if as_json:
        click.echo(json.dumps(figures))
    else:
        click.echo(f"timeline: {path}")
        click.echo(f"bubble ratio: {ratio:.1%} over {figures['resources']} resources, "
                   f"{figures['role_switches']} role switches")

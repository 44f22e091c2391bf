"""`seamlessflow tasks publish FILE --pool P`: a JSONL task file onto the running stack's tasks topic, for one
agent pool.

Why addressed to one pool: every pool reads the one tasks topic, and a pool run without `--kind` (the
stack's demo pool) runs every task it sees; the header the workers' own retries carry keeps these tasks to
the pool they were written for. That pool is run with `--kind` so it skips the stack's other tasks.
"""

from __future__ import annotations

from pathlib import Path

import click

from seamlessflow.agents.options import consumer_group
from seamlessflow.agents.tasks import file_tasks, publish_tasks
from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.scheduler.options import ManagerOptions


@click.group()
def tasks() -> None:
    """Tasks for agent pools (the rollout manager publishes its own source's; these are yours)."""


@tasks.command("publish")
@click.argument("path", metavar="FILE", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--pool", required=True, help="The agent pool that runs them (`seamlessflow agent run --pool`).")
@click.option("--kind", help="Task kind (default: the pool's name); run the pool with `--kind KIND`.")
@click.option("--team", help="Team of the pool (default: settings.team).")
@click.option("--group-size", type=click.IntRange(1), help="Sessions per task, one GRPO group (default: the "
              "trainer's group_size).")
@click.option("--passes", type=click.IntRange(1), default=1, show_default=True,
              help="Times over the file; each pass publishes every task again as a new group.")
@pass_settings
def tasks_publish(settings: Settings, path: Path, pool: str, kind: str | None, team: str | None,
                  group_size: int | None, passes: int) -> None:
    """Publish every task of FILE (one `{"task_id", "prompt", "answer", ...}` object a line) for pool POOL."""
    team = team or settings.team
    try:
        records = file_tasks(path, kind or pool, group_size or ManagerOptions.from_settings(settings).group_size, team,
                             settings.run, passes)
    except (ValueError, KeyError) as exc:
        raise click.BadParameter(str(exc), param_hint="FILE") from exc
    count = publish_tasks(settings, codec_for(settings), records, for_group=consumer_group(team, pool))
    click.echo(f"published {count} task(s) of kind {kind or pool} for pool {consumer_group(team, pool)} "
               f"({passes} pass(es) over {path})", err=True)

"""`seamlessflow teacher run`: a teacher worker of group `<team>.teacher` on `to-teach` (on-policy distillation)."""

from __future__ import annotations

import logging
import signal

import click

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.teacher.options import TeacherOptions
from seamlessflow.teacher.worker import TeacherWorker


@click.group()
def teacher() -> None:
    """Run teacher workers (a teacher's per-token logprobs on each trajectory, for distillation)."""


@teacher.command("run")
@click.option("--team", help="The team whose teacher this is (default: settings.team); `teacher.teams.<team>`.")
@click.option("--concurrency", type=int, help="Teacher requests at once.")
@click.option("--max-attempts", type=int, help="Requests for one trajectory before it goes on untaught.")
@pass_settings
def teacher_run(settings: Settings, team: str | None, concurrency: int | None, max_attempts: int | None) -> None:
    """Add the team's teacher logprobs to each of its trajectories on `to-teach`, until SIGTERM. Refuses to start
    when the teacher's tokenizer differs from the student's. More workers of a team share the work."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    options = TeacherOptions.from_settings(settings, concurrency=concurrency, max_attempts=max_attempts)
    worker = TeacherWorker(settings, codec_for(settings), team or settings.team, options)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    click.echo(f"teacher {worker.label} at {worker.spec.url or worker.spec.engine} in group {worker.group}, "
               f"{options.concurrency} at a time", err=True)
    stats = worker.run()
    click.echo(f"taught {stats.taught}, untaught {stats.untaught}, skipped {stats.skipped}", err=True)

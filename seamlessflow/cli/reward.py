"""`seamlessflow reward run MODULE:FUNCTION`: a reward worker of pool `<team>.reward.<pool>` on `to-score`."""

from __future__ import annotations

import logging
import signal

import click

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.rewards.options import RewardOptions
from seamlessflow.rewards.worker import RewardWorker


@click.group()
def reward() -> None:
    """Run reward workers (verifiers scoring trajectories off the GPU path)."""


@reward.command("run")
@click.argument("reference", metavar="MODULE:FUNCTION")
@click.option("--team", help="Team the pool belongs to (default: settings.team).")
@click.option("--pool", help="The verifier name this pool serves; workers of one pool share the work.")
@click.option("--concurrency", type=int, help="Verifier calls at once (each in its own child process).")
@click.option("--timeout-s", type=float, help="One verifier call; a hang is killed here.")
@click.option("--memory-mb", type=int, help="Address-space limit of each verifier call.")
@click.option("--max-attempts", type=int, help="Calls of a verifier that raises or crashes before unscorable.")
@pass_settings
def reward_run(settings: Settings, reference: str, team: str | None, pool: str | None, concurrency: int | None,
               timeout_s: float | None, memory_mb: int | None, max_attempts: int | None) -> None:
    """Score every trajectory whose reward request names this pool's verifier, until SIGTERM.

    FUNCTION(request: seamlessflow.rewards.ScoreRequest) returns a reward or (reward, info), or raises.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    opts = RewardOptions.from_settings(settings, pool=pool, concurrency=concurrency, timeout_s=timeout_s,
                                        memory_mb=memory_mb, max_attempts=max_attempts)
    worker = RewardWorker(settings, codec_for(settings), reference, team or settings.team, opts)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    click.echo(f"reward {reference} in pool {worker.group}, {opts.concurrency} at a time, "
               f"timeout {opts.timeout_s:g} s", err=True)
    stats = worker.run()
    click.echo(f"scored {stats.scored}, unscorable {stats.unscorable}, skipped {stats.skipped}, "
               f"calls {stats.calls}", err=True)

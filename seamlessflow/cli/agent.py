"""`seamlessflow agent run MODULE:FUNCTION`: a worker of the team pool `<team>.<pool>` on the tasks topic."""

from __future__ import annotations

import logging
import signal
from pathlib import Path

import click

from seamlessflow.agents import AgentSettings, AgentWorker, WorkerFailed
from seamlessflow.cli.context import pass_settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.user_code import load_function


@click.group()
def agent():
    """Run agent workers (your function + an OpenAI client bound to the proxy)."""


@agent.command("run")
@click.argument("reference", metavar="MODULE:FUNCTION")
@click.option("--team", help="Team the pool belongs to (default: settings.team).")
@click.option("--pool", help="Pool name; workers with the same team and pool share the tasks.")
@click.option("--concurrency", type=int, help="Sessions this worker runs at once.")
@click.option("--key", help="The team's API key (default: <data-dir>/<team>.key).")
@click.option("--proxy-url", help="Proxy root URL, e.g. http://127.0.0.1:8000.")
@click.option("--max-attempts", type=int, help="Runs of a failing session before it ends as failed.")
@click.option("--kind", "kinds", multiple=True, help="Only tasks of this kind (repeatable).")
@pass_settings
def agent_run(settings, reference, team, pool, concurrency, key, proxy_url, max_attempts, kinds):
    """Run MODULE:FUNCTION (or path/file.py:FUNCTION) for every task of the pool until SIGTERM.

    FUNCTION(task, client) returns a reward or (reward, info) or raises. A plain `def` receives an
    `openai.OpenAI` client; an `async def` receives an `openai.AsyncOpenAI` one.
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    team = team or settings.team
    opts = AgentSettings.from_settings(settings, pool=pool, concurrency=concurrency, proxy_url=proxy_url,
                                       max_attempts=max_attempts, kinds=list(kinds) or None)
    worker = AgentWorker(settings, codec_for(settings), load_function(reference), team, _key(settings, team, key), opts)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    click.echo(f"agent {reference} in pool {worker.group}, {opts.concurrency} at a time, proxy {opts.proxy_url}",
               err=True)
    try:
        stats = worker.run()
    except WorkerFailed as exc:
        raise click.ClickException(f"stopped, uncommitted tasks left for other workers: {exc}") from exc
    click.echo(f"tasks done {stats.tasks_done}, skipped {stats.tasks_skipped}, sessions {stats.sessions}, "
               f"retries {stats.retries_published}, dead letters {stats.dead_letters}", err=True)


def _key(settings, team: str, key: str | None) -> str:
    if key:
        return key
    key_file = Path(settings.data_dir) / f"{team}.key"
    if key_file.exists():
        return key_file.read_text().strip()
    raise click.UsageError(f"no --key given and no {key_file}; issue one with `seamlessflow team add {team}`")

"""`seamlessflow agent run MODULE:FUNCTION`: a worker of the team pool `<team>.<pool>` on the tasks topic."""

from __future__ import annotations

import logging
import signal

import click

from seamlessflow.agents import WorkerFailed
from seamlessflow.agents.start import NoTeamKey, agent_worker
from seamlessflow.cli.context import pass_settings


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
    try:
        worker = agent_worker(settings, reference, team, key, pool=pool, concurrency=concurrency, proxy_url=proxy_url,
                              max_attempts=max_attempts, kinds=list(kinds) or None)
    except NoTeamKey as exc:
        raise click.UsageError(str(exc)) from exc
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    click.echo(f"agent {reference} in pool {worker.group}, {worker.opts.concurrency} at a time, "
               f"proxy {worker.opts.proxy_url}", err=True)
    try:
        stats = worker.run()
    except WorkerFailed as exc:
        raise click.ClickException(f"stopped, uncommitted tasks left for other workers: {exc}") from exc
    click.echo(f"tasks done {stats.tasks_done}, skipped {stats.tasks_skipped}, sessions {stats.sessions}, "
               f"retries {stats.retries_published}, dead letters {stats.dead_letters}", err=True)

"""`seamlessflow agent run MODULE:FUNCTION`: a worker of the team pool `<team>.<pool>` on the tasks topic."""

from __future__ import annotations

import logging
import signal

import click
import yaml

from seamlessflow.agents import WorkerFailed
from seamlessflow.agents.start import NoTeamKey, agent_worker
from seamlessflow.cli.agent_passes import PassReport, ServedVersion
from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.stack.paths import config_path


@click.group()
def agent() -> None:
    """Run agent workers (your function + an OpenAI client bound to the proxy)."""


@agent.command("run")
@click.argument("reference", metavar="MODULE:FUNCTION")
@click.option("--team", help="Team the pool belongs to (default: settings.team).")
@click.option("--pool", help="Pool name; workers with the same team and pool share the tasks.")
@click.option("--concurrency", type=int, help="Sessions this worker runs at once (with --max-concurrency: at first).")
@click.option("--max-concurrency", type=int, help="Let the sessions in flight follow the engines' load up to this.")
@click.option("--key", help="The team's API key (default: <data-dir>/<team>.key).")
@click.option("--proxy-url", help="Proxy root URL, e.g. http://127.0.0.1:8000.")
@click.option("--max-attempts", type=int, help="Runs of a failing session before it ends as failed.")
@click.option("--kind", "kinds", multiple=True, help="Only tasks of this kind (repeatable).")
@click.option("--keep-running", is_flag=True, help="Keep waiting for tasks once the passes that `tasks publish "
              "--passes` published are spent (default: say so and stop).")
@click.option("--pace-patience-s", type=float, default=120.0, show_default=True,
              help="A published pass starts once the one before ended and the policy moved past the version it "
                   "ended on, or this long after it ended.")
@pass_settings
def agent_run(settings: Settings, reference: str, team: str | None, pool: str | None, concurrency: int | None,
              max_concurrency: int | None, key: str | None, proxy_url: str | None, max_attempts: int | None,
              kinds: tuple[str, ...], keep_running: bool, pace_patience_s: float) -> None:
    """Run MODULE:FUNCTION (or path/file.py:FUNCTION) for every task of the pool until SIGTERM, or until the
    passes of a published task file are spent.

    FUNCTION(task, client) returns a reward or (reward, info) or raises. A plain `def` receives an
    `openai.OpenAI` client; an `async def` receives an `openai.AsyncOpenAI` one. Tasks published with `tasks
    publish` name their pass: each pass's mean reward is printed as it ends, and a pass starts once the policy
    was updated after the one before it (the passes are the pool's learning curve, not ten runs of one policy).
    """
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    try:
        worker = agent_worker(settings, reference, team, key, pool=pool, concurrency=concurrency,
                              max_concurrency=max_concurrency, proxy_url=proxy_url or running_proxy_url(settings),
                              max_attempts=max_attempts,
                              kinds=list(kinds) or None)
    except NoTeamKey as exc:
        raise click.UsageError(str(exc)) from exc
    report = PassReport(worker.stop if not keep_running else None, ServedVersion(worker.opts.proxy_url),
                        patience_s=pace_patience_s)
    worker.on_task_done, worker.gate = report.task_done, report.may_start
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: worker.stop())
    most = f" (up to {worker.opts.max_concurrency} as the engines' load allows)" if worker.opts.max_concurrency else ""
    click.echo(f"agent {reference} in pool {worker.group}, {worker.opts.concurrency} at a time{most}, "
               f"proxy {worker.opts.proxy_url}", err=True)
    try:
        stats = worker.run()
    except WorkerFailed as exc:
        raise click.ClickException(f"stopped, uncommitted tasks left for other workers: {exc}") from exc
    click.echo(f"tasks done {stats.tasks_done}, skipped {stats.tasks_skipped}, sessions {stats.sessions}, "
               f"retries {stats.retries_published}, dead letters {stats.dead_letters}", err=True)


def running_proxy_url(settings: Settings) -> str | None:
    """The proxy of the stack `up` runs on this data dir (its settings in <data-dir>/run/config.yaml), unless
    the `agents` section names one: a worker started by hand reaches the stack's proxy (port 8100 on the
    embedded default) without being told, as the stack's own pools do."""
    path = config_path(settings)
    if "proxy_url" in settings.section("agents") or not path.exists():
        return None
    agents = (yaml.safe_load(path.read_text()) or {}).get("agents") or {}
    return agents.get("proxy_url")

"""`python -m services.agents MODULE:FUNCTION --team T --pool P ...`: the agent worker as a service.

The same worker as `seamlessflow agent run` (`seamlessflow.agents.start`); settings come from --config /
SEAMLESSFLOW_* like every service. Stops cleanly on SIGTERM/SIGINT (running tasks get the revoke grace).
"""

import argparse
import logging
import threading

from seamlessflow.agents.start import agent_worker
from seamlessflow.config import Settings
from seamlessflow.service_main import run_until_signal

log = logging.getLogger("seamlessflow.agents")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("reference", metavar="MODULE:FUNCTION", help="the agent (or path/file.py:FUNCTION)")
    parser.add_argument("--team", help="team the pool belongs to (default: settings.team)")
    parser.add_argument("--pool", help="pool name; workers with the same team and pool share the tasks")
    parser.add_argument("--concurrency", type=int, help="sessions this worker runs at once (with a maximum: at first)")
    parser.add_argument("--max-concurrency", type=int, help="let the sessions in flight follow the engines' load up "
                        "to this (seamlessflow/core/sessions_in_flight.py)")
    parser.add_argument("--key", help="the team's API key (default: <data-dir>/<team>.key)")
    parser.add_argument("--proxy-url", help="proxy root URL, e.g. http://127.0.0.1:8000")
    parser.add_argument("--max-attempts", type=int, help="runs of a failing session before it ends as failed")
    parser.add_argument("--kind", dest="kinds", action="append", help="only tasks of this kind (repeatable)")


def run(settings: Settings, stop: threading.Event, args: argparse.Namespace) -> None:
    worker = agent_worker(settings, args.reference, args.team, args.key, pool=args.pool, concurrency=args.concurrency,
                          max_concurrency=args.max_concurrency, proxy_url=args.proxy_url,
                          max_attempts=args.max_attempts, kinds=args.kinds)
    log.info("agent %s in pool %s, %d at a time, proxy %s", args.reference, worker.group, worker.opts.concurrency,
             worker.opts.proxy_url)
    stats = worker.run(stop)  # WorkerFailed: uncommitted tasks are left for other workers, the process fails
    log.info("tasks done %d, skipped %d, sessions %s, retries %d, dead letters %d", stats.tasks_done,
             stats.tasks_skipped, stats.sessions, stats.retries_published, stats.dead_letters)


def main() -> None:
    run_until_signal("services.agents", run, add_arguments=add_arguments)


if __name__ == "__main__":
    main()

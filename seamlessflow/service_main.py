"""One entry shape for every service: `python -m services.<role> --config PATH [role options]`.

Every service parses the same `--config`, logs the same way, serves Prometheus `/metrics` (on
`$SEAMLESSFLOW_METRICS_PORT`, which `up` gives each one) and stops on SIGTERM/SIGINT by setting an event
its loop watches, so it finishes the turn in progress and flushes what it produced. Written once here, so a
new service cannot forget the metrics or the clean stop. A run that returns an int exits with it; one that
lost its role to a newer process (`Fenced`) logs it and exits with `FENCED_EXIT_CODE`.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable, Iterable

from seamlessflow.allocator import fix_mmap_threshold, start_trimming
from seamlessflow.config import Settings
from seamlessflow.kafka.fencing import FENCED_EXIT_CODE, Fenced
from seamlessflow.memory_probe import start_from_environment
from seamlessflow.service_metrics import serve_metrics

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"

Run = Callable[[Settings, threading.Event, argparse.Namespace], object]
Prepare = Callable[[Settings, argparse.Namespace], object]


def run_until_signal(module: str, run: Run, *, add_arguments: Callable[[argparse.ArgumentParser], object] | None = None,
                     quiet_loggers: Iterable[str] = (), prepare: Prepare | None = None,
                     log_format: str = LOG_FORMAT, metrics: bool = True) -> None:
    """Parses `--config` (and what `add_arguments` adds), then runs `run(settings, stop, args)` until a signal.

    `prepare(settings, args)` runs before anything else is set up (the trainer replaces its process with
    torch's launcher there); `metrics=False` for a process whose sibling serves the service's /metrics."""
    fix_mmap_threshold()  # only when $SEAMLESSFLOW_MALLOC_MMAP_THRESHOLD asks (seamlessflow/allocator.py)
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    settings = Settings.load(args.config)
    if prepare is not None:
        prepare(settings, args)
    logging.basicConfig(level=logging.INFO, format=log_format)
    start_from_environment(module)  # memory snapshots, only when asked for (seamlessflow/memory_probe.py)
    start_trimming(module)  # only when $SEAMLESSFLOW_MALLOC_TRIM_S asks (seamlessflow/allocator.py)
    for name in quiet_loggers:
        logging.getLogger(name).setLevel(logging.WARNING)
    if metrics:
        serve_metrics()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        result = run(settings, stop, args)
    except Fenced as exc:  # a newer process holds the role: leave it alone, and say why (seamlessflow.kafka.fencing)
        logging.getLogger(module).error("fenced, exiting: %s", exc)
        raise SystemExit(FENCED_EXIT_CODE) from exc
    if isinstance(result, int) and not isinstance(result, bool):
        raise SystemExit(result)


def when_stopped(stop: threading.Event, then: Callable[[], object]) -> None:
    """Calls `then` (on a daemon thread) once `stop` is set: for a loop that has its own way to be stopped."""
    threading.Thread(target=lambda: (stop.wait(), then()), name="stop-watch", daemon=True).start()

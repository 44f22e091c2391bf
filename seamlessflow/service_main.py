"""One entry shape for the services that run until a signal: `python -m services.<role> --config PATH`.

Every such service parses the same `--config`, logs the same way, serves Prometheus `/metrics` (on
`$SEAMLESSFLOW_METRICS_PORT`, which `up` gives each one) and stops on SIGTERM/SIGINT by setting an event
its loop watches, so it finishes the turn in progress and flushes what it produced. Written once here, so a
new service cannot forget the metrics or the clean stop.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from collections.abc import Callable, Iterable

from seamlessflow.config import Settings
from seamlessflow.service_metrics import serve_metrics

LOG_FORMAT = "%(asctime)s %(name)s %(levelname)s %(message)s"

Run = Callable[[Settings, threading.Event, argparse.Namespace], object]


def run_until_signal(module: str, run: Run, *, add_arguments: Callable[[argparse.ArgumentParser], object] | None = None,
                     quiet_loggers: Iterable[str] = ()) -> None:
    """Parses `--config` (and what `add_arguments` adds), then runs `run(settings, stop, args)` until a signal."""
    parser = argparse.ArgumentParser(prog=f"python -m {module}")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    if add_arguments is not None:
        add_arguments(parser)
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format=LOG_FORMAT)
    for name in quiet_loggers:
        logging.getLogger(name).setLevel(logging.WARNING)
    serve_metrics()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run(Settings.load(args.config), stop, args)

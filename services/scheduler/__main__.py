"""Runs the scheduler (and rollout manager): `python -m services.scheduler --config PATH`.

Stops cleanly on SIGTERM/SIGINT (finishes the current tick, flushes what it produced).
"""

import argparse
import logging
import signal
import threading

from seamlessflow.config import Settings
from seamlessflow.scheduler.service import run_service
from seamlessflow.service_metrics import serve_metrics


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m services.scheduler")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    serve_metrics()
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_service(Settings.load(args.config), stop)


if __name__ == "__main__":
    main()

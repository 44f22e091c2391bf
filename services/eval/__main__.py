"""Runs the eval service: `python -m services.eval --config PATH` (seamlessflow.evaluation.service).

Stops cleanly on SIGTERM/SIGINT (after the pass in progress).
"""

import argparse
import logging
import signal
import threading

from seamlessflow.config import Settings
from seamlessflow.evaluation.service import run_service


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m services.eval")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_service(Settings.load(args.config), stop)


if __name__ == "__main__":
    main()

"""Runs the web dashboard: `python -m services.dashboard --config PATH` (settings section `dashboard:`).

Stops cleanly on SIGTERM/SIGINT.
"""

import argparse
import logging
import signal
import threading

from seamlessflow.config import Settings
from seamlessflow.dashboard.app import run_dashboard


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m services.dashboard")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_dashboard(Settings.load(args.config), stop, announce=logging.getLogger("dashboard").info)


if __name__ == "__main__":
    main()

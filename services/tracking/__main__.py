"""Runs the metrics sink: `python -m services.tracking --config PATH` (TensorBoard event files by default).

Stops cleanly on SIGTERM/SIGINT (flushes the trackers and commits what they hold).
"""

import argparse
import logging
import signal
import threading

from seamlessflow.config import Settings
from seamlessflow.service_metrics import serve_metrics
from seamlessflow.tracking.sink import run_service


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m services.tracking")
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

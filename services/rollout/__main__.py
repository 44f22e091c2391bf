"""Runs one rollout worker: `python -m services.rollout --config PATH --resource-id ID`.

Starts and supervises a vLLM server for resource ID, obeys the control topic, heartbeats on the
status topic. Stops cleanly on SIGTERM/SIGINT (the engine is stopped too).
"""

import argparse
import logging
import signal
import threading

from seamlessflow.config import Settings
from seamlessflow.rollout.service import run_service
from seamlessflow.service_metrics import serve_metrics


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m services.rollout")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    parser.add_argument("--resource-id", required=True, help="this worker's resource id (its control-topic key)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    serve_metrics()
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per heartbeat otherwise
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    run_service(Settings.load(args.config), args.resource_id, stop)


if __name__ == "__main__":
    main()

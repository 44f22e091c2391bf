"""Runs the trainer: `python -m services.trainer --config PATH` (settings section `trainer:`)."""

import argparse
import logging

from seamlessflow.config import Settings
from services.trainer.app import run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m services.trainer")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    raise SystemExit(run(Settings.load(args.config)))


if __name__ == "__main__":
    main()

"""Runs the assembler worker: `python -m services.assembler --config PATH`."""

import argparse

from seamlessflow.assembler.app import run
from seamlessflow.config import Settings
from seamlessflow.service_metrics import serve_metrics


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m services.assembler")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    args = parser.parse_args()
    serve_metrics()
    run(Settings.load(args.config))


if __name__ == "__main__":
    main()

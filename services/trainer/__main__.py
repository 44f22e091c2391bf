"""Runs the trainer: `python -m services.trainer --config PATH` (settings section `trainer:`).

With `trainer.ranks` > 1 (or `nnodes` > 1) the process replaces itself with torch's launcher, which
starts the ranks, each running this module again (`seamlessflow.trainer.launch`).
"""

import argparse
import logging
import os

from seamlessflow.config import Settings
from seamlessflow.service_metrics import serve_metrics
from seamlessflow.trainer.config import TrainerConfig
from seamlessflow.trainer.launch import launcher_argv, under_launcher
from seamlessflow.trainer.loop import run


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m services.trainer")
    parser.add_argument("--config", help="settings YAML (default: SEAMLESSFLOW_CONFIG or built-in defaults)")
    args = parser.parse_args()
    settings = Settings.load(args.config)
    argv = None if under_launcher() else launcher_argv(TrainerConfig.from_settings(settings), args.config)
    if argv is not None:  # the ranks read the same file (or inherit SEAMLESSFLOW_CONFIG)
        os.execv(argv[0], argv)
    rank = os.environ.get("RANK", "0")
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s %(name)s[rank {rank}] %(levelname)s %(message)s")
    if rank == "0":  # the rank that publishes the heartbeats
        serve_metrics()
    raise SystemExit(run(settings))


if __name__ == "__main__":
    main()

"""Runs the trainer: `python -m services.trainer --config PATH` (settings section `trainer:`).

With `trainer.ranks` > 1 (or `nnodes` > 1) the process replaces itself with torch's launcher, which
starts the ranks, each running this module again (`seamlessflow.trainer.launch`); rank 0 serves /metrics
(it publishes the heartbeats). Stops cleanly on SIGTERM/SIGINT (a checkpoint of what was trained since the
last one).
"""

import argparse
import os
import threading

from seamlessflow.config import Settings
from seamlessflow.model.choice import ensure_model
from seamlessflow.service_main import run_until_signal, when_stopped
from seamlessflow.trainer.launch import launcher_argv, under_launcher
from seamlessflow.trainer.options import TrainerOptions


def start_ranks(settings: Settings, args: argparse.Namespace) -> None:
    """Several ranks: this process becomes torch's launcher (the ranks read the same file or inherit
    SEAMLESSFLOW_CONFIG). Before that, once per node, the model the engines serve is found or built here when
    no `trainer.model_path` names one (on another host than `up`'s, nothing of its data_dir is here)."""
    if not under_launcher() and not TrainerOptions.from_settings(settings).model_path:
        ensure_model(settings)
    argv = None if under_launcher() else launcher_argv(TrainerOptions.from_settings(settings), args.config)
    if argv is not None:
        os.execv(argv[0], argv)


def run(settings: Settings, stop: threading.Event, _args: argparse.Namespace) -> int:
    from seamlessflow.trainer.loop import Trainer, start_rank  # DeepSpeed: after the launcher took over, if it does

    part = start_rank(settings)
    if isinstance(part, Trainer):  # followers stop when the leader tells them
        when_stopped(stop, lambda: setattr(part, "stopping", True))
    return part.run()


def main() -> None:
    rank = os.environ.get("RANK", "0")
    run_until_signal("services.trainer", run, prepare=start_ranks, metrics=rank == "0",
                     log_format=f"%(asctime)s %(name)s[rank {rank}] %(levelname)s %(message)s")


if __name__ == "__main__":
    main()

"""Training time by team weight: two teams' adapter trainers on one machine, with the scheduler's training time
share (`scheduler.train_share`) and without it, side by side in one run.

Real: the embedded broker, the scheduler service (thread), one DeepSpeed trainer process per team (`trainer.adapter`,
as `up` runs them), each training its team's LoRA adapter on the default model's shape (random weights). Both teams
always have work: each team's trajectories are on the topic before the trainers start, more than they can train
in the window. The two runs differ only in `scheduler.train_share.enabled`; weights are red 3, blue 1.

Printed per run: each trainer's seconds in steps and publishing (`busy_s`, its heartbeat figure) and steps over the
measured window, red's share of the busy time against the 0.75 the weights ask for, and the steps of both.

Usage: python benchmarks/bench_train_share.py [--seconds 120] [--slice-s 6] [--tokens 384] [--groups 2000]
"""

from __future__ import annotations

import argparse
import dataclasses
import multiprocessing
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seamlessflow.broker.local import LocalBroker  # noqa: E402
from seamlessflow.config import Settings  # noqa: E402
from seamlessflow.kafka.admin import ensure_topics  # noqa: E402
from seamlessflow.kafka.codecs import codec_for  # noqa: E402
from seamlessflow.kafka.io import MessageProducer, read_messages  # noqa: E402
from seamlessflow.messages import ResourceStatus  # noqa: E402
from seamlessflow.topics import Topics  # noqa: E402

WEIGHTS = {"red": 3.0, "blue": 1.0}


def run_trainer(config_yaml: str, team: str) -> None:
    """One team's trainer process, as `up` starts it: its team's options (`for_adapter`), until SIGTERM."""
    import signal

    from seamlessflow.trainer.loop import Trainer
    from seamlessflow.trainer.options import TrainerOptions

    settings = Settings.load(Path(config_yaml), env={})
    trainer = Trainer(settings, TrainerOptions.from_settings(settings).for_adapter(team).with_model(settings))
    signal.signal(signal.SIGTERM, lambda *_: setattr(trainer, "stopping", True))
    trainer.run()


def publish_work(settings: Settings, model_dir: Path, groups: int, tokens: int) -> None:
    """`groups` GRPO groups (two trajectories, rewards 1 and 0) per team, `tokens` long, half of them trained."""
    from seamlessflow.testing.trainer_records import trajectory

    producer = MessageProducer(settings, codec_for(settings))
    ids = [(i * 7919) % 16000 + 10 for i in range(tokens)]
    mask = [0] * (tokens // 2) + [1] * (tokens - tokens // 2)
    templates = [trajectory(model_dir, f"t{i}/0", "g", ids[:-1] + [11 + i], mask, float(1 - i)) for i in (0, 1)]
    topic = Topics(settings).trajectories
    for team in WEIGHTS:
        for g in range(groups):
            for i, template in enumerate(templates):
                sid = f"{team}-{g}-{i}"
                record = dataclasses.replace(template, event_id=f"{sid}/0", session_id=sid, group_id=f"{team}.{g}",
                                             task_id=f"{team}.{g}", team=team, run=settings.run)
                producer.send(topic, record.group_id, record)
    producer.flush(60)


def busy(settings: Settings) -> dict[str, tuple[float, float]]:
    """Each trainer's newest (busy_s, step) from the status topic."""
    out: dict[str, tuple[float, float]] = {}
    for status in read_messages(settings, Topics(settings).status, codec_for(settings)):
        if isinstance(status, ResourceStatus) and status.kind == "trainer" and "busy_s" in status.figures:
            team = status.resource_id.rsplit("-", 1)[-1]
            out[team] = (status.figures["busy_s"], status.figures["step"])
    return out


def measure(settings: Settings, config_yaml: Path, seconds: float) -> dict[str, tuple[float, float]]:
    """Starts the scheduler and both trainers, waits until both have stepped, measures `seconds`; returns each
    team's (busy seconds, steps) in the window."""
    from seamlessflow.scheduler.service import SchedulerService

    stop = threading.Event()
    scheduler = threading.Thread(target=SchedulerService(settings).run, args=(stop,), daemon=True)
    scheduler.start()
    spawn = multiprocessing.get_context("spawn")
    trainers = [spawn.Process(target=run_trainer, args=(str(config_yaml), team)) for team in WEIGHTS]
    for process in trainers:
        process.start()
    try:
        deadline = time.monotonic() + 600
        while not (len(start := busy(settings)) == len(WEIGHTS) and all(s > 0 for _, s in start.values())):
            if time.monotonic() > deadline:
                raise TimeoutError("the trainers did not both step within 10 minutes")
            time.sleep(2)
        time.sleep(seconds)
        end = busy(settings)
        return {team: (end[team][0] - start[team][0], end[team][1] - start[team][1]) for team in WEIGHTS}
    finally:
        for process in trainers:
            process.terminate()
        for process in trainers:
            process.join(120)
        stop.set()
        scheduler.join(30)


def settings_for(base: Settings, work: Path, model_dir: Path, share: bool, slice_s: float) -> Settings:
    from seamlessflow.model.lora import write_adapter

    teams = {}
    for seed, team in enumerate(WEIGHTS, start=1):
        path = work / "adapters" / team
        if not path.exists():
            write_adapter(model_dir, path, rank=8, seed=seed)
        teams[team] = {"lora": {"name": f"{team}-lora", "path": str(path), "rank": 8}}
    prefix = f"share{int(share)}"
    return base.with_overrides(
        topic_prefix=prefix, data_dir=str(work / prefix),
        proxy={"teams": teams},
        trainer={"target": "adapters", "model_path": str(model_dir), "group_size": 2, "batch_threshold": 1,
                 "heartbeat_s": 0.5, "checkpoint_every": 100000, "keep_weight_versions": 2,
                 "teams": {team: {"share_weight": w} for team, w in WEIGHTS.items()}},
        scheduler={"policy": "disaggregated", "tick_s": 0.5, "min_dwell_s": 0.0, "batch_threshold": 2,
                   "train_share": {"enabled": share, "slice_s": slice_s}},
        manager={"group_size": 2, "max_in_flight": 1, "sources": [{"name": t, "team": t} for t in WEIGHTS]},
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=120)
    parser.add_argument("--slice-s", type=float, default=6.0)
    parser.add_argument("--tokens", type=int, default=384)
    parser.add_argument("--groups", type=int, default=2000)
    args = parser.parse_args()

    from seamlessflow.testing.models import build_long_context_tiny_model

    work = Path(tempfile.mkdtemp(prefix="bench-train-share-"))
    model_dir = build_long_context_tiny_model(work / "model")
    broker = LocalBroker(work / "broker").start()
    try:
        rows = {}
        for share in (False, True):
            settings = settings_for(broker.client_settings, work, model_dir, share, args.slice_s)
            ensure_topics(settings)
            publish_work(settings, model_dir, args.groups, args.tokens)
            rows[share] = measure(settings, settings.dump_yaml(work / f"config-{int(share)}.yaml"), args.seconds)
        print(f"two adapter trainers (rank 8) on the default model's shape, {args.tokens}-token trajectories, "
              f"groups of 2; weights red {WEIGHTS['red']:g} : blue {WEIGHTS['blue']:g}; {args.seconds:g} s measured "
              f"per run; slices of {args.slice_s:g} s; {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")
        print(f"{'train_share':>12} {'red busy s':>11} {'blue busy s':>12} {'red share':>10} {'asked':>6} "
              f"{'red steps':>10} {'blue steps':>11} {'steps/min':>10}")
        asked = WEIGHTS["red"] / sum(WEIGHTS.values())
        for share, row in rows.items():
            (red_s, red_steps), (blue_s, blue_steps) = row["red"], row["blue"]
            print(f"{'on' if share else 'off':>12} {red_s:11.1f} {blue_s:12.1f} {red_s / (red_s + blue_s):10.2f} "
                  f"{asked:6.2f} {red_steps:10.0f} {blue_steps:11.0f} "
                  f"{(red_steps + blue_steps) * 60 / args.seconds:10.1f}")
    finally:
        broker.stop()


if __name__ == "__main__":
    main()

"""Reward workers in a test against the real broker: unscored trajectories that ask the `exact` verifier
(`seamlessflow.testing.verifiers`) for a score, published; a worker in a thread; its outputs waited for."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterable
from typing import Any

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.episodes import TrajectoryStatus
from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import Trajectory
from seamlessflow.rewards.options import RewardOptions
from seamlessflow.rewards.request import REQUEST_KEY
from seamlessflow.rewards.worker import RewardWorker
from seamlessflow.topics import Topics

REF = "seamlessflow.testing.verifiers:exact"


def unscored(session: str, submission: str, verifier: str = "exact",
             payload: dict[str, Any] | None = None) -> Trajectory:
    request = {"verifier": verifier, "submission": submission, "prompt": "q", "payload": payload or {"answer": "42"}}
    return Trajectory(f"{session}/0", session, 0, f"g-{session}", "t", "default", "default", [1, 2, 3], [0, 1, 1],
                      [0.0, -0.1, -0.2], [-1, 0, 0], 0.0, TrajectoryStatus.DONE, 1, 0, 1,
                      json.dumps({REQUEST_KEY: request}))


def publish(settings: Settings, codec: Codec, trajectories: Iterable[Trajectory]) -> None:
    producer = MessageProducer(settings, codec)
    for t in trajectories:
        producer.send(Topics(settings).to_score, t.group_id, t)
    producer.flush()


class Running:
    def __init__(self, worker: RewardWorker) -> None:
        self.worker = worker
        self.thread = threading.Thread(target=worker.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.worker.stop()
        self.thread.join(60)


def wait_for_outputs(settings: Settings, codec: Codec, count: int, timeout_s: float = 90.0) -> list[Trajectory]:
    deadline = time.monotonic() + timeout_s
    while True:
        out = read_messages(settings, Topics(settings).trajectories, codec)
        if len(out) >= count or time.monotonic() > deadline:
            return out
        time.sleep(0.5)


def options(**extra: Any) -> RewardOptions:
    return RewardOptions(**{"pool": "exact", "concurrency": 2, "timeout_s": 6.0, "max_attempts": 2, "poll_s": 0.1,
                             **extra})

"""Running an agent worker in a test against the real broker: the worker in a thread, the tasks topic's
committed and end offsets, and a plain wait (the proxy's end endpoint: `end_proxy_stand_in`)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from seamlessflow.agents import AgentWorker
from seamlessflow.config import Settings
from seamlessflow.kafka.io import read_topic
from seamlessflow.kafka.positions import CommittedOffsets
from seamlessflow.topics import Topics

KEY = "sf-red-test-key"


class Running:
    """A worker in a thread; `result` is its stats or the exception it stopped with."""

    def __init__(self, worker: AgentWorker) -> None:
        self.worker: AgentWorker = worker
        self.result: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert worker.wait_assigned(60), "worker never joined its consumer group"

    def _run(self) -> None:
        try:
            self.result = self.worker.run()
        except Exception as exc:  # surfaced to the test through `result`
            self.result = exc

    def stop(self) -> Any:
        self.worker.stop()
        self.thread.join(60)
        return self.result


def wait_for(condition: Callable[[], object], timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "condition not reached in time"
        time.sleep(0.1)


def committed(settings: Settings, group: str) -> dict[int, int]:
    topics = Topics(settings)
    marks = CommittedOffsets(settings, group, topics.tasks)
    try:
        found = marks.read(list(range(topics.specs["tasks"].partitions)))
        return {p: offset for p, offset in found.items() if offset > 0}  # 0: nothing committed there
    finally:
        marks.close()


def end_offsets(settings: Settings) -> dict[int, int]:
    ends = {}
    for record in read_topic(settings, Topics(settings).tasks):
        ends[record.partition] = record.offset + 1
    return ends

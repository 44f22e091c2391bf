"""Building and publishing Task records (for task sources, tests and the examples)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import Task, new_id, now_ms
from seamlessflow.topics import Topics


def make_task(kind: str, prompt: str, payload: dict[str, Any], group_size: int = 1, task_id: str | None = None,
              team: str = "default", run: str = "default", group_id: str | None = None) -> Task:
    task_id = task_id or new_id()
    return Task(new_id(), task_id, group_id or f"{task_id}.g", team, run, kind, prompt,
                json.dumps(payload), group_size, 0, now_ms())


def publish_tasks(settings: Settings, codec: Codec, tasks: Iterable[Task]) -> int:
    """Produces tasks keyed by group id and waits until all are durable; returns how many."""
    producer = MessageProducer(settings, codec)
    topic = Topics(settings).tasks
    count = 0
    for task in tasks:
        producer.send(topic, task.group_id, task)
        count += 1
    producer.flush()
    return count

"""Building and publishing Task records (for task sources, tests and the examples)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from seamlessflow.agents.worker import POOL_HEADER
from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.passes import PUBLISHED_KEY, Published
from seamlessflow.kafka.io import Headers, MessageProducer
from seamlessflow.messages import Task, new_id, now_ms
from seamlessflow.tasks.loader import load_tasks
from seamlessflow.topics import Topics


def make_task(kind: str, prompt: str, payload: dict[str, Any], group_size: int = 1, task_id: str | None = None,
              team: str = "default", run: str = "default", group_id: str | None = None) -> Task:
    task_id = task_id or new_id()
    return Task(new_id(), task_id, group_id or f"{task_id}.g", team, run, kind, prompt,
                json.dumps(payload), group_size, 0, now_ms())


def file_tasks(path: str | Path, kind: str, group_size: int, team: str, run: str, passes: int = 1) -> list[Task]:
    """A JSONL task file (seamlessflow.tasks.load_tasks) as Task records: `passes` times over the file, each
    task once a pass, each its own group (a fresh group id: groups of two passes never merge in the trainer).
    The payload is the line's other fields, its `answer` and its pass (core.passes.Published: how `agent run`
    tells the passes apart and knows when they are spent)."""
    records, lines = [], load_tasks(path)
    for index in range(passes):
        published = {PUBLISHED_KEY: Published(index, passes, len(lines)).as_payload()}
        for task in lines:
            payload = {**dict(task.extra), **published, "answer": task.answer}
            task_id = f"{task.task_id}.p{index}"
            records.append(make_task(kind, task.prompt, payload, group_size, task_id, team, run,
                                     group_id=f"{run}.{task_id}.{new_id()[:8]}"))
    return records


def publish_tasks(settings: Settings, codec: Codec, tasks: Iterable[Task], for_group: str | None = None) -> int:
    """Produces tasks keyed by group id and waits until all are durable; returns how many. `for_group`: only
    that consumer group (`<team>.<pool>`) runs them, as the worker's retries are addressed (POOL_HEADER)."""
    producer = MessageProducer(settings, codec)
    topic = Topics(settings).tasks
    headers: Headers = [(POOL_HEADER, for_group.encode())] if for_group else None
    count = 0
    for task in tasks:
        producer.send(topic, task.group_id, task, headers=headers)
        count += 1
    producer.flush()
    return count

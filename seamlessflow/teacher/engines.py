"""A teacher served by one of the stack's own engines: its URL as the engine announces it on the status topic.

Why the status topic: a rollout worker's engine listens on a port chosen at its start (or a node Ray chose), and
announces `engine_url` in every heartbeat; the proxies find engines the same way. So `teacher.teams.<team>.engine:
rollout-0` (with `model:` an adapter's name, a team can distil from the adapter another team trained) needs no
address in the config, and the worker asks again when the engine it used stops answering (it moved).
"""

from __future__ import annotations

import time

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind
from seamlessflow.kafka.reader import read_topic
from seamlessflow.messages import ResourceStatus
from seamlessflow.topics import Topics


class EngineNotFound(RuntimeError):
    """No heartbeat of that engine on the status topic within the wait."""


def engine_url(settings: Settings, codec: Codec, resource_id: str, wait_s: float = 60.0) -> str:
    """The newest engine URL the rollout worker `resource_id` announced; waits up to ``wait_s`` for one."""
    deadline = time.monotonic() + wait_s
    while True:
        url = None
        for record in read_topic(settings, Topics(settings).status, codec, timeout_s=10.0):
            status = record.message
            if (not record.error and isinstance(status, ResourceStatus) and status.resource_id == resource_id
                    and status.kind == ResourceKind.ROLLOUT and status.engine_url):
                url = status.engine_url
        if url is not None:
            return url
        if time.monotonic() > deadline:
            raise EngineNotFound(f"no heartbeat of engine {resource_id!r} with its URL on {Topics(settings).status}")
        time.sleep(1.0)

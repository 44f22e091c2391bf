"""Readiness for the supervisor: the scheduler is up once its own heartbeat appears on the status topic."""

from __future__ import annotations

from collections.abc import Callable

from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.messages import ResourceStatus, now_ms
from seamlessflow.scheduler.options import SchedulerOptions
from seamlessflow.scheduler.reading import records_until
from seamlessflow.topics import Topics


def scheduler_ready(settings: Settings) -> Callable[[], bool]:
    """A check for `ServiceSpec.ready`: true after a heartbeat of this scheduler newer than the call."""
    since_ms, resource_id = now_ms(), SchedulerOptions.from_settings(settings).resource_id
    topic, codec = Topics(settings).status, codec_for(settings)

    def ready() -> bool:
        return any(isinstance(r.message, ResourceStatus) and r.message.resource_id == resource_id
                   and r.message.created_at_ms >= since_ms for r in records_until(settings, topic, codec, timeout_s=5))

    return ready

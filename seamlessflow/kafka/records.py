"""Builders for the records every service publishes the same way: a heartbeat and a dead letter.

Why: each service used to spell out all fourteen fields of a `ResourceStatus` (and the id and clock
fields of a `DeadLetter`) by position or name; a field added to the message then had to be found in six
places. Here the fields a service does not decide (ids, clocks, defaults) are filled once.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.messages import DeadLetter, ResourceStatus, new_id, now_ms


def resource_status(resource_id: str, kind: ResourceKind, state: ResourceState, active_tag: str, team: str, run: str, *,
                    capability_tags: Iterable[str] = (), weight_version: int = -1,
                    figures: Mapping[str, float] | None = None, engine_url: str | None = None, epoch: int = 0,
                    hardware_tags: Iterable[str] = (), note: str | None = None) -> ResourceStatus:
    """A heartbeat (or a verdict on one resource's key), stamped now with a fresh id."""
    return ResourceStatus(new_id(), resource_id, kind, list(capability_tags), active_tag, state, weight_version,
                          {k: float(v) for k, v in (figures or {}).items()}, team, run, now_ms(), engine_url, epoch,
                          list(hardware_tags), note)


def letter_for(service: str, topic: str, partition: int, offset: int, key: bytes | None, value: bytes | None,
               reason: str, team: str, run: str, detail: str = "") -> DeadLetter:
    """A letter whose id is `<service>:<topic>/<partition>/<offset>[/<detail>]`: the same record read again
    after a restart gives the same id, so a reader of the dead-letter topic can de-duplicate."""
    event_id = f"{service}:{topic}/{partition}/{offset}" + (f"/{detail}" if detail else "")
    return DeadLetter(event_id, topic, partition, offset, key, value or b"", reason, service, team, run, now_ms())

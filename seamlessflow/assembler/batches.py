"""Session-events records from Faust's consumer in batches, without a Faust stream step per record.

Why: Faust's stream iterator costs more per record than the assembler's own work (a profile of a backlog
drain: each record goes through `mode`'s `wait_first`, two new asyncio tasks, the stream's sensor and
context-variable bookkeeping, and one more await in the agent). Faust's consumer and conductor still fetch,
decode the key/value as raw bytes and buffer every record in the agent channel's queue, with its flow
control (fetching pauses for a partition while the queue is over its high-water mark) and its group
membership, rebalances and offset commits; this module takes whatever the queue holds, up to `max_events`,
in one step, and applies the two checks the stream made per record: records fetched before a rebalance
(another generation, or while flow control is suspended) are dropped, since the partition is re-read from
its committed offset; the others are tracked as in flight, as the stream tracked them. `RawBytes` skips
Faust's per-record codec lookups for keys and values that stay bytes (the session book decodes them).
"""

from __future__ import annotations

from typing import Any

import faust


async def next_batch(app: faust.App, queue: Any, max_events: int) -> list[Any]:
    """The records buffered in `queue` (the agent channel's), at least one (waits for it), at most `max_events`."""
    events = [await queue.get()]
    while len(events) < max_events and not queue.empty():
        events.append(queue.get_nowait())
    return [event for event in events if _current(app, event)]


def _current(app: faust.App, event: Any) -> bool:
    message = event.message
    if not app.flow_control.is_active() or message.generation_id != app.consumer_generation_id:
        return False
    if not message.tracked:
        message.tracked = True
        app.consumer.track_message(message)
    return True


class RawBytes(faust.Schema):
    """Key and value as the bytes on the wire, without looking up the "raw" codec twice per record."""

    def compile(self, app: Any, **kwargs: Any) -> Any:
        create_event = app.create_event

        async def decode(message: Any, *, propagate: bool = False) -> Any:
            return create_event(message.key, message.value, message.headers, message)

        return decode

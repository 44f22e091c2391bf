"""For retry tests: a publisher whose first call's acknowledgement reaches the proxy late, and the assembler's
book run over one session's records as they lie on the session-events topic."""

from __future__ import annotations

import asyncio
from typing import Any

from seamlessflow.assembler import AssemblerOptions, SessionBook
from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.messages import DeadLetter, EpisodeEnd, TokenIO, Trajectory
from seamlessflow.proxy import ProxyService
from seamlessflow.proxy.publisher import EventPublisher
from seamlessflow.testing.proxy_harness import session_events


class LateFirstAcknowledgement:
    """The real publisher; only the proxy learns of the first call's acknowledgement `delay_s` late. Kafka
    has that record at once: this is a reply that comes after the client's timeout, the record already made."""

    def __init__(self, inner: EventPublisher, delay_s: float) -> None:
        self.inner, self.delay_s, self.delayed = inner, delay_s, False

    def publish(self, topic: str, key: str, message: Any) -> asyncio.Future:
        future = self.inner.publish(topic, key, message)
        if self.delayed or not isinstance(message, TokenIO):
            return future
        self.delayed = True
        return asyncio.ensure_future(self._late(future))

    async def _late(self, future: asyncio.Future) -> Any:
        await asyncio.sleep(self.delay_s)
        return await future


def acknowledge_first_call_late(proxy: ProxyService, delay_s: float) -> None:
    recorder: Any = proxy.server.recorder  # its publisher swapped for the wrapper, which is not one
    recorder.publisher = LateFirstAcknowledgement(recorder.publisher, delay_s)


async def trajectories(settings: Settings, codec: Codec, session_id: str) -> tuple[list[Trajectory], list[DeadLetter]]:
    """The session's trajectories as the assembler's book makes them from its records (ended by then), and its
    dead letters."""
    book = SessionBook(AssemblerOptions.model_validate({}), codec, "session-events", "alpha", settings.run)
    out: list[Trajectory] = []
    letters: list[DeadLetter] = []
    messages = await session_events(settings, codec, session_id, whole_prompts=False)
    assert isinstance(messages[-1], EpisodeEnd), "end the session first"
    for offset, message in enumerate(messages):
        result = book.on_record(0, offset, session_id.encode(), codec.encode(message, "session-events"))
        out += result.trajectories
        letters += result.dead_letters
    return out, letters

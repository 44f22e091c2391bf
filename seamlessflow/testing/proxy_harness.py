"""Driving an in-process proxy in tests: its team keys, clients of a session, control commands, and the
session-events records read back (the proxy fixtures themselves are in tests/conftest.py)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Container, Iterable
from typing import Any, cast

import openai

from seamlessflow.assembler.convert import with_whole_prompts
from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.control import CommandKind
from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import CommandAck, ControlCommand, TokenIO, new_id, now_ms
from seamlessflow.proxy import ProxyService
from seamlessflow.topics import Topics

KEYS = {"alpha": "key-alpha", "beta": "key-beta"}  # team -> key of the proxies the tests start


async def session_events(settings: Settings, codec: Codec, session_id: str | None = None,
                         whole_prompts: bool = True) -> list[Any]:
    """The session-events messages (of one session), prompts recorded as deltas made whole (unless not asked)."""
    messages = await asyncio.to_thread(read_messages, settings, Topics(settings).session_events, codec)
    if whole_prompts:
        calls = iter(with_whole_prompts(m for m in messages if isinstance(m, TokenIO)))
        messages = [next(calls) if isinstance(m, TokenIO) else m for m in messages]
    return [m for m in messages if session_id is None or m.session_id == session_id]


async def acks(settings: Settings, codec: Codec, command_id: str, wait_s: float = 10.0) -> list[CommandAck]:
    """The acks of a command on the status topic, waiting up to `wait_s` for the first (an ack is published
    after the command is applied, so it can trail what the test just observed); [] if none came."""
    deadline = time.monotonic() + wait_s
    while True:
        messages = await asyncio.to_thread(read_messages, settings, Topics(settings).status, codec)
        found = [m for m in messages if isinstance(m, CommandAck) and m.command_id == command_id]
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


async def send_command(settings: Settings, codec: Codec, command: str, resource_id: str = "proxy", epoch: int = 1,
                       producer: MessageProducer | None = None, **fields: Any) -> ControlCommand:
    """`command` may be a kind the protocol does not know, which the receiver must refuse."""
    message = ControlCommand(event_id=new_id(), resource_id=resource_id, epoch=epoch,
                             command=cast(CommandKind, command), team="default", run=settings.run,
                             created_at_ms=now_ms(), **fields)
    producer = producer or MessageProducer(settings, codec)
    await asyncio.to_thread(producer.send_and_wait, Topics(settings).control, resource_id, message)
    return message


async def until(predicate: Callable[[], object], timeout_s: float = 30.0, what: str = "condition") -> None:
    """Wait on the event loop until `predicate()` holds; TimeoutError naming `what` after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(0.02)


def client(proxy: ProxyService, session_id: str, key: str = "key-alpha") -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key=key, max_retries=0)


def tagged_client(proxy: ProxyService, session_id: str, profile: str | None = None) -> openai.AsyncOpenAI:
    """A session's client that declares its hardware profile (`X-Session-Profile`), if given one."""
    headers = {"X-Session-Profile": profile} if profile else None
    return openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key="key-alpha", max_retries=0,
                              default_headers=headers)


async def call(proxy: ProxyService, session_id: str, profile: str | None = None, content: str = "q",
               max_tokens: int = 2) -> Any:
    """One chat call of a session through `tagged_client`."""
    async with tagged_client(proxy, session_id, profile) as c:
        return await c.chat.completions.create(model="m", messages=[{"role": "user", "content": content}],
                                               max_tokens=max_tokens)


async def engines_of(settings: Settings, codec: Codec, sessions: Iterable[str],
                     skip: Container[Any] = ()) -> dict[str, list[str]]:
    """Engines that served each session's calls, in order (events in `skip` left out)."""
    seen: dict[str, list[str]] = {s: [] for s in sessions}
    for event in await session_events(settings, codec):
        if event.session_id in seen and event not in skip:
            seen[event.session_id].append(event.engine_id)
    return seen

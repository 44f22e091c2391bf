"""Small helpers shared by proxy tests: reading events back, sending control commands, waiting."""

from __future__ import annotations

import asyncio
import time

import openai

from seamlessflow.assembler.convert import with_whole_prompts
from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.messages import CommandAck, ControlCommand, TokenIO, new_id, now_ms
from seamlessflow.topics import Topics


async def session_events(settings, codec, session_id=None, whole_prompts=True):
    """The session-events messages (of one session), prompts recorded as deltas made whole (unless not asked)."""
    messages = await asyncio.to_thread(read_messages, settings, Topics(settings).session_events, codec)
    if whole_prompts:
        calls = iter(with_whole_prompts(m for m in messages if isinstance(m, TokenIO)))
        messages = [next(calls) if isinstance(m, TokenIO) else m for m in messages]
    return [m for m in messages if session_id is None or m.session_id == session_id]


async def acks(settings, codec, command_id, wait_s: float = 10.0):
    """The acks of a command on the status topic, waiting up to `wait_s` for the first (an ack is published
    after the command is applied, so it can trail what the test just observed); [] if none came."""
    deadline = time.monotonic() + wait_s
    while True:
        messages = await asyncio.to_thread(read_messages, settings, Topics(settings).status, codec)
        found = [m for m in messages if isinstance(m, CommandAck) and m.command_id == command_id]
        if found or time.monotonic() > deadline:
            return found
        await asyncio.sleep(0.2)


async def send_command(
    settings, codec, command: str, resource_id="proxy", epoch=1, producer=None, **fields
) -> ControlCommand:
    message = ControlCommand(event_id=new_id(), resource_id=resource_id, epoch=epoch, command=command, team="default",
                             run=settings.run, created_at_ms=now_ms(), **fields)
    producer = producer or MessageProducer(settings, codec)
    await asyncio.to_thread(producer.send_and_wait, Topics(settings).control, resource_id, message)
    return message


async def until(predicate, timeout_s=30.0, what="condition"):
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"waited {timeout_s} s for {what}")
        await asyncio.sleep(0.02)


def client(proxy, session_id, key="key-alpha"):
    return openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key=key, max_retries=0)

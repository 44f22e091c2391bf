"""Prompt deltas through the proxy (StubEngine): later turns are recorded as deltas of earlier acknowledged
records, and the assembler and a flat reader rebuild prompts bit for bit what the engine saw."""

from __future__ import annotations

import asyncio

import numpy as np
import openai

from seamlessflow.assembler.convert import call_from_token_io, with_whole_prompts
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.core.assembler import SessionAssembler
from seamlessflow.kafka.io import read_messages
from seamlessflow.loadtest.stub_engine import token_at
from seamlessflow.messages import TokenIO
from seamlessflow.proxy.deltas import MIN_SHARED_TOKENS, PromptBases, shared_prefix
from seamlessflow.topics import Topics


def client(proxy, session_id):
    return openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key="key-alpha", max_retries=0)


async def records(settings, codec, session_id) -> list[TokenIO]:
    messages = await asyncio.to_thread(read_messages, settings, Topics(settings).session_events, codec)
    return [m for m in messages if isinstance(m, TokenIO) and m.session_id == session_id]


async def agent_turns(proxy, session_id, turns=4, first=40) -> list[list[int]]:
    """A token-level agent: each prompt is the previous prompt, its completion and a few new ids."""
    agent, prompt, prompts = client(proxy, session_id), [7] * first, []
    for turn in range(turns):
        prompts.append(prompt)
        reply = await agent.completions.create(model="stub-model", prompt=prompt, max_tokens=3,
                                               extra_body={"return_token_ids": True})
        prompt = prompt + list(reply.choices[0].model_extra["token_ids"]) + [8 + turn] * 5
    return prompts


async def test_later_turns_are_deltas_of_the_previous_record(proxy, settings, codec):
    prompts = await agent_turns(proxy, "d1")
    recorded = await records(settings, codec, "d1")
    assert recorded[0].prompt_base_id is None and recorded[0].prompt_ids == prompts[0]
    for previous, record, prompt in zip(recorded, recorded[1:], prompts[1:], strict=False):
        sequence = len(previous.prompt_ids) + previous.prompt_base_tokens + len(previous.completion_ids)
        assert (record.prompt_base_id, record.prompt_base_tokens) == (previous.event_id, sequence)
        assert record.prompt_ids == prompt[sequence:] and len(record.prompt_ids) == 5
    assert [r.prompt_ids for r in with_whole_prompts(recorded)] == prompts


async def test_the_assembler_rebuilds_the_session_bit_for_bit(proxy, settings, codec):
    prompts = await agent_turns(proxy, "d2", turns=5)
    session = SessionAssembler(AssemblerOptions().assembler_config())
    for record in await records(settings, codec, "d2"):
        session.add(call_from_token_io(record))
    [sequence] = session.finish()
    last = prompts[-1]
    expected = last + [token_at(len(last) + k) for k in range(3)]
    generated = {len(prompt) + k for prompt in prompts for k in range(3)}
    assert sequence.tokens == expected
    assert sequence.loss_mask == [int(p in generated) for p in range(len(expected))]
    assert list(sequence.last_call.prompt_ids) == last and sequence.last_call.prompt_base is None


async def test_a_chat_prompt_shares_only_its_common_prefix(proxy, settings, codec):
    """Chat re-renders the history as text, so the next prompt shares the first prompt's ids, not the
    completion's: the delta's base covers just the common prefix."""
    agent, opening = client(proxy, "d3"), "x" * MIN_SHARED_TOKENS * 2
    messages = [{"role": "user", "content": opening}]
    reply = await agent.chat.completions.create(model="stub-model", messages=messages, max_tokens=2)
    messages += [{"role": "assistant", "content": reply.choices[0].message.content}, {"role": "user", "content": "y"}]
    await agent.chat.completions.create(model="stub-model", messages=messages, max_tokens=2)
    first, second = await records(settings, codec, "d3")
    assert (second.prompt_base_id, second.prompt_base_tokens) == (first.event_id, len(opening))
    whole = with_whole_prompts([first, second])[1].prompt_ids
    assert whole == list((opening + reply.choices[0].message.content + "y").encode())


async def test_short_prompts_and_a_disabled_proxy_record_whole_prompts(proxy_factory, stub, settings, codec):
    proxy = await proxy_factory([stub], prompt_deltas=False)
    await agent_turns(proxy, "d4", turns=3)
    short = await proxy_factory([stub])
    await agent_turns(short, "d5", turns=3, first=MIN_SHARED_TOKENS // 4)  # turn 2 shares 8 + 3 ids: too few
    recorded = await records(settings, codec, "d4") + (await records(settings, codec, "d5"))[:2]
    assert all(r.prompt_base_id is None and r.prompt_base_tokens == 0 for r in recorded)


def test_bases_keep_the_newest_per_session_within_the_memory_budget():
    ids = np.arange(100, dtype=np.int32)
    bases = PromptBases(per_session=2, budget_bytes=3 * ids.nbytes)
    for n, session in enumerate(["a", "a", "a", "b"]):
        bases.remember(session, f"{session}{n}", ids)
    assert bases.base_for("a", ids) == ("a1", 100) and len(bases) == 2  # a0 fell out of a's last two
    bases.remember("c", "c0", ids)  # over budget: the least recent session (a) goes whole
    assert bases.base_for("a", ids) is None and bases.base_for("b", ids[:40]) == ("b3", 40)
    assert bases.bytes == 2 * ids.nbytes
    assert shared_prefix(ids, np.concatenate([ids[:50], ids[:10]])) == 50

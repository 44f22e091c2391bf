"""Shared fixtures: a real embedded broker (Apache Kafka, KRaft) for the session, and per-test isolated topics;
the session's one vLLM-CPU engine, the trainers' tiny model, and an in-process proxy in front of stub engines,
for the packages whose tests share them. Helpers that are not fixtures live in `seamlessflow/testing`."""

from __future__ import annotations

import os
import uuid
from pathlib import Path

import pytest

from seamlessflow.broker.local import LocalBroker
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.testing import suite_timing, timeout_logs
from seamlessflow.testing.models import build_long_context_tiny_model, build_random_tiny_model
from seamlessflow.testing.vllm_server import LONG_REPLY_TOKENS, STACK_WINDOW, VllmServer

# Every broker the suite starts (the session's, clusters, each `up`'s) lives seconds to minutes: C1-compiled
# Kafka reaches ready on about half the CPU of a tiered start (5.1 vs 9.1 CPU-s measured per broker), and the
# suite is CPU-bound on 2 cores. Children inherit it; `up` outside the suite keeps the JVM's defaults.
os.environ.setdefault("SEAMLESSFLOW_BROKER_JVM_OPTIONS", "-XX:TieredStopAtLevel=1")
# Ray 2.60 turns token authentication on for any process that finds ~/.ray/auth_token (which a local `ray.init()`
# writes once), but the test clusters' helpers ask their GCS with a client that sends no token: so on a machine
# where one was ever written, every test cluster looked dead ("waited 120 s for the Ray head"). Off for the suite.
os.environ.setdefault("RAY_AUTH_MODE", "disabled")


def pytest_configure(config):
    """With SEAMLESSFLOW_TEST_TIMES set (`make test` sets it), each file's summed test durations are appended
    there, for the suite's timing table (`python -m seamlessflow.testing.suite_timing`). A test stopped by its
    timeout (pyproject.toml) reports the end of its services' logs beside its threads' stacks."""
    suite_timing.register(config)
    timeout_logs.register(config)


def pytest_itemcollected(item):
    """Groups for pytest-xdist (`make test` runs two workers with `--dist loadgroup`): a file's tests stay on
    one worker, in order (several files share a module-scoped service that each test leaves serving), and
    every test of the one vLLM engine goes to the same worker, so the engine starts once. Marked as each test
    is collected, before xdist reads the marks into the node ids. Without xdist the marks do nothing."""
    group = "vllm-engine" if "vllm_engine" in item.fixturenames else item.nodeid.split("::")[0]
    item.add_marker(pytest.mark.xdist_group(group))
    engine_start_room(item)


# Whichever test first asks for a shared engine pays its start (106 s seen at load 20 on 2 cores, 70 s for the long
# context one): 3x that plus the test's own ~20 s. The default timeout (pyproject.toml) could not hold it.
ENGINE_TEST_TIMEOUT_S = 390


def engine_start_room(item):
    limit = item.get_closest_marker("timeout")  # a test's own mark, else its module's: kept when it is longer
    if {"vllm_engine", "long_context_engine"} & set(item.fixturenames) and (
            limit is None or limit.args[0] < ENGINE_TEST_TIMEOUT_S):
        item.add_marker(pytest.mark.timeout(ENGINE_TEST_TIMEOUT_S))


@pytest.fixture(scope="session")
def broker(tmp_path_factory) -> LocalBroker:
    """One single-node Kafka for the whole test session; tests isolate themselves by topic prefix."""
    proc = LocalBroker(tmp_path_factory.mktemp("broker")).start()
    yield proc
    proc.stop()


@pytest.fixture
def settings(broker, tmp_path) -> Settings:
    """Client settings with a fresh topic prefix (all declared topics created) and a fresh data dir."""
    s = broker.client_settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:10]}", data_dir=tmp_path / "data")
    ensure_topics(s)
    return s


@pytest.fixture
def codec():
    from seamlessflow.avro import Codec

    return Codec()


@pytest.fixture
def in_process_stack():
    """Parts of the system a test starts in or beside its process, all stopped at teardown
    (`seamlessflow/testing/in_process.py`; a test that checks what the parts left behind uses
    `with InProcessStack() as stack:` instead, to stop them before its checks)."""
    from seamlessflow.testing.in_process import InProcessStack

    with InProcessStack() as stack:
        yield stack


# One real vLLM-CPU engine for the whole session, whichever package's tests ask for it first (defined here
# once: a session fixture imported into two modules would start two engines, minutes each on 2 cores).
@pytest.fixture(scope="session")
def vllm_model_dir(tmp_path_factory) -> Path:
    return build_random_tiny_model(tmp_path_factory.mktemp("tiny-model") / "model")


@pytest.fixture(scope="session")
def vllm_engine(vllm_model_dir, tmp_path_factory) -> VllmServer:
    server = VllmServer(vllm_model_dir, tmp_path_factory.mktemp("vllm") / "vllm.log").start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """A tiny random Qwen2 causal LM saved as an HF directory (nothing is downloaded), for the trainers."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    path = tmp_path_factory.mktemp("tiny-lm")
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=32, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=2,
        num_key_value_heads=1, head_dim=32, max_position_embeddings=128, tie_word_embeddings=True, pad_token_id=0,
    )
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


@pytest.fixture
async def stub():
    """The proxy's StubEngine (a fake engine, no model) on a port of its own."""
    from seamlessflow.loadtest.stub_engine import StubEngine

    engine = await StubEngine().start()
    yield engine
    await engine.stop()


@pytest.fixture
async def proxy_factory(settings, tmp_path):
    """Starts in-process proxies (port 0) in front of the given engines (stubs, URLs or engine config dicts);
    stops them after the test."""
    from seamlessflow.proxy import ProxyOptions, ProxyService
    from seamlessflow.teams import TeamKeys
    from seamlessflow.testing.proxy_harness import KEYS

    services: list[ProxyService] = []

    async def make(engines, **options) -> ProxyService:
        listed = [
            e if isinstance(e, dict) else {"id": f"e{i}", "url": getattr(e, "url", e)} for i, e in enumerate(engines)
        ]
        config = ProxyOptions.model_validate(
            {"port": 0, "engines": listed, "heartbeat_s": 1, "health_interval_s": 0.2, **options}
        )
        service = await ProxyService(settings, config, team_keys=TeamKeys(tmp_path / "teams.json", KEYS)).start()
        services.append(service)
        await service.wait_listening()
        return service

    yield make
    for service in services:
        await service.stop()


@pytest.fixture
async def proxy(proxy_factory, stub):
    return await proxy_factory([stub])


@pytest.fixture(scope="module")
def long_context_engine(tmp_path_factory):
    """The default model untrained (its tokenizer and positions) at the stack's default window, for harnesses
    whose prompts are long (Codex, Claude Code, the scaffolds); the engine caps replies (Codex sends no limit).
    One per module, stopped at its end: kept for the whole session it would hold its memory (an engine's few
    GB) beside the session's other engine for the rest of the run."""
    model = build_long_context_tiny_model(tmp_path_factory.mktemp("long-model") / "model")
    server = VllmServer(model, tmp_path_factory.mktemp("long-vllm") / "vllm.log", max_model_len=STACK_WINDOW,
                        extra_args=("--override-generation-config", f'{{"max_new_tokens": {LONG_REPLY_TOKENS}}}'))
    yield server.start()
    server.stop()

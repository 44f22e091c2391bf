"""The gloo backend's wire, trainer engine to engine-side engine in one process (two threads).

The receiving model here is a plain module with vLLM's `load_weights([(name, tensor)])` signature; the
real vLLM model and the HTTP endpoints are exercised in test_live_engines.py.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from vllm.distributed.weight_transfer.base import ModuleSource

from seamlessflow.ports import free_port
from seamlessflow.weights.gloo import (
    GlooTrainerInitInfo,
    GlooTrainerWeightTransferEngine,
    GlooWeightTransferEngine,
)


class Receiver(torch.nn.Module):
    """Takes weights the way a vLLM model does; records each call's size so buckets can be checked."""

    def __init__(self, like: torch.nn.Module):
        super().__init__()
        self.state = {k: torch.zeros_like(v) for k, v in like.state_dict().items()}
        self.calls: list[int] = []

    def load_weights(self, weights):
        weights = list(weights)
        self.calls.append(sum(t.numel() * t.element_size() for _, t in weights))
        for name, tensor in weights:
            self.state[name].copy_(tensor)


class LocalClient:
    """The four control calls, made on the engine-side engine directly instead of over HTTP."""

    def __init__(self, engine: GlooWeightTransferEngine, fail_update: bool = False):
        self.engine, self.fail_update, self.calls = engine, fail_update, []

    def init_weight_transfer_engine(self, init_info):
        self.engine.init_transfer_engine(self.engine.parse_init_info(init_info))

    def start_weight_update(self):
        self.calls.append("start")

    def update_weights(self, update_info):
        if self.fail_update:
            raise RuntimeError("engine refused the update")
        self.engine.update_weights(update_info)

    def finish_weight_update(self, weight_version=None):
        self.calls.append("finish")


def model() -> torch.nn.Module:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Embedding(50, 16), torch.nn.Linear(16, 32), torch.nn.Linear(32, 50))
    return net.to(torch.bfloat16)


def engine_side(receiver: torch.nn.Module) -> GlooWeightTransferEngine:
    parallel = SimpleNamespace(data_parallel_index=0, world_size=1, rank=0)
    return GlooWeightTransferEngine(None, SimpleNamespace(parallel_config=parallel, model_config=None),
                                    torch.device("cpu"), receiver)


def connect(source: torch.nn.Module, receiver: Receiver, bucket_bytes: int, **client_kw):
    client = LocalClient(engine_side(receiver), **client_kw)
    info = GlooTrainerInitInfo("127.0.0.1", free_port(), 2, bucket_bytes=bucket_bytes, timeout_s=10, rank=0)
    return client, GlooTrainerWeightTransferEngine.trainer_init(info, client=client, source=ModuleSource(source))


def test_every_weight_arrives_bit_exact_in_bounded_buckets():
    source = model()
    receiver = Receiver(source)
    client, trainer = connect(source, receiver, bucket_bytes=2048)
    trainer.send_weights()
    for name, tensor in source.state_dict().items():
        assert torch.equal(receiver.state[name], tensor), name
    largest = max(p.numel() * p.element_size() for p in source.parameters())
    assert len(receiver.calls) > 1 and max(receiver.calls) <= max(2048, largest)
    assert sum(receiver.calls) == sum(p.numel() * p.element_size() for p in source.parameters())
    assert client.calls == ["start", "finish"]


def test_a_second_round_sends_the_new_version_over_the_same_group():
    source = model()
    receiver = Receiver(source)
    _, trainer = connect(source, receiver, bucket_bytes=1 << 20)
    trainer.send_weights()
    with torch.no_grad():
        for p in source.parameters():
            p.add_(1.0)
    trainer.send_weights()
    assert all(torch.equal(receiver.state[k], v) for k, v in source.state_dict().items())


def test_an_engine_that_refuses_the_round_fails_the_send_instead_of_hanging():
    source = model()
    client, trainer = connect(source, Receiver(source), bucket_bytes=1024, fail_update=True)
    with pytest.raises(RuntimeError, match="refused"):
        trainer.send_weights()
    assert client.calls == ["start"]


def test_metadata_and_iteration_must_agree():
    source = model()
    _, trainer = connect(source, Receiver(source), bucket_bytes=1 << 20)
    trainer.source = ModuleSource(torch.nn.Sequential(torch.nn.Linear(3, 3)))
    with pytest.raises((ValueError, RuntimeError)):
        trainer.send_weights()


def test_the_trainer_side_is_chosen_by_backend_name():
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

    from seamlessflow.weights.broadcast import init_info_for

    gloo, nccl = init_info_for("gloo", "10.0.0.1")(), init_info_for("nccl", "10.0.0.1", bucket_bytes=1 << 20)()
    assert isinstance(gloo, GlooTrainerInitInfo) and gloo.master_address == "10.0.0.1" and gloo.world_size == 2
    assert isinstance(nccl, NCCLTrainerInitInfo) and nccl.packed and nccl.packed_buffer_size_bytes == 1 << 20
    with pytest.raises(ValueError):
        init_info_for("ipc", "10.0.0.1")

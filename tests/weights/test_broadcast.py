"""What the broadcaster does when an engine cannot join or stalls (the live path is in test_live_engines.py),
and the snapshot it sends."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import torch

# Loaded in a live engine; the gloo engine's first receive imports it, slower than a send's bound on a busy machine.
import vllm.model_executor.model_loader.mtp_validation  # noqa: F401

from seamlessflow.ports import free_port
from seamlessflow.weights.broadcast import PolicyBroadcaster, SideStreams, SnapshotSource, gloo_init_info
from seamlessflow.weights.engine_client import transfer_client
from seamlessflow.weights.gloo import GlooWeightTransferEngine


def test_an_engine_that_cannot_join_is_told_why_at_once_and_gets_nothing():
    broadcaster = PolicyBroadcaster(torch.nn.Linear(4, 4), gloo_init_info("127.0.0.1", timeout_s=3),
                                    transfer_client)
    began = time.monotonic()
    reason = broadcaster.join(f"http://127.0.0.1:{free_port()}")  # nothing listens there
    assert reason and "init_weight_transfer_engine" in reason
    assert time.monotonic() - began < 10  # not the rendezvous timeout
    assert broadcaster.links == {}
    assert broadcaster.send(2).seconds == {} and broadcaster.send(2).failed == {}


def test_the_snapshot_source_declares_what_it_yields_in_order():
    source = SnapshotSource()
    source.state = {"b": torch.zeros(2, 3), "a": torch.ones(4, dtype=torch.bfloat16)}
    assert [(m.name, m.dtype, m.shape) for m in source.metadata()] == [
        ("b", torch.float32, (2, 3)),
        ("a", torch.bfloat16, (4,)),
    ]
    assert [name for name, _ in source] == ["b", "a"]


class StandInEngine(torch.nn.Module):
    """Stand-in for an engine behind its HTTP API (an `EngineLink`): the transfer routes drive a real gloo
    engine-side transfer engine in this process, which loads into this module as vLLM's model would. With
    `stall_after`, it stops loading after that many buckets and so never reads the rest (a hung engine); a
    closed link refuses every call, as a closed HTTP client does."""

    def __init__(self, like: torch.nn.Module, stall_after: int | None = None, stall_join: bool = False):
        super().__init__()
        self.weights = {name: torch.zeros_like(t) for name, t in like.state_dict().items()}
        self.stall_after, self.stall_join, self.buckets = stall_after, stall_join, 0
        self.unstalled = threading.Event()
        self.version: int | None = None
        self.resumed = self.closed = False
        parallel = SimpleNamespace(data_parallel_index=0, world_size=1, rank=0)
        self.engine = GlooWeightTransferEngine(None, SimpleNamespace(parallel_config=parallel, model_config=None),
                                               torch.device("cpu"), self)

    def load_weights(self, weights):
        if self.stall_after is not None and self.buckets >= self.stall_after:
            self.unstalled.wait()
        self.buckets += 1
        for name, tensor in weights:
            self.weights[name].copy_(tensor)

    def _open(self):
        if self.closed:
            raise RuntimeError("the link is closed")

    def init_weight_transfer_engine(self, init_info):
        self._open()
        if self.stall_join:
            self.unstalled.wait()
        self.engine.init_transfer_engine(self.engine.parse_init_info(init_info))

    def start_weight_update(self):
        self._open()

    def update_weights(self, update_info):
        self._open()
        self.engine.update_weights(update_info)

    def finish_weight_update(self, weight_version=None):
        self._open()

    def pause(self, mode):
        self._open()

    def reset_prefix_cache(self, reset_running):
        self._open()
        return True

    def set_weight_version(self, version):
        self._open()
        self.version = version

    def resume(self):
        self._open()
        self.resumed = True

    def close(self):
        self.closed = True


def several_buckets() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 64), torch.nn.Linear(64, 64))


GROUP_TIMEOUT_S = 120  # gloo's own bound on a rendezvous or a broadcast: where a stall would end without ours
TIMEOUT_S = 8  # the broadcaster's per-engine bound: generous for a healthy send on a busy 2-core machine


def test_a_stalled_engine_is_dropped_from_the_version_and_the_others_take_it_in_time():
    source = several_buckets()
    engines = {"http://a": StandInEngine(source), "http://stalls": StandInEngine(source, stall_after=1),
               "http://c": StandInEngine(source)}
    failed: dict[str, str] = {}
    broadcaster = PolicyBroadcaster(source, gloo_init_info("127.0.0.1", bucket_bytes=4096, timeout_s=GROUP_TIMEOUT_S),
                                    engines.__getitem__, on_failed=failed.__setitem__, timeout_s=TIMEOUT_S)
    try:
        assert all(broadcaster.join(url) is None for url in engines)
        began = time.monotonic()
        delivery = broadcaster.send(2)
        took = time.monotonic() - began
    finally:
        engines["http://stalls"].unstalled.set()
    assert took < GROUP_TIMEOUT_S / 2  # returned at our bound, not when the stalled group gives up
    assert set(delivery.seconds) == {"http://a", "http://c"} and set(delivery.failed) == set(failed) == {"http://stalls"}
    assert "stalled" in failed["http://stalls"]
    for url in ("http://a", "http://c"):
        assert engines[url].version == 2 and engines[url].resumed
        assert all(torch.equal(engines[url].weights[k], v) for k, v in source.state_dict().items())
    stalled = engines["http://stalls"]
    assert stalled.version is None and not stalled.resumed and stalled.closed  # half a version: left paused
    assert set(broadcaster.links) == {"http://a", "http://c"}


def test_an_engine_that_never_joins_is_given_up_on_in_time():
    source = several_buckets()
    engine = StandInEngine(source, stall_join=True)
    broadcaster = PolicyBroadcaster(source, gloo_init_info("127.0.0.1", timeout_s=GROUP_TIMEOUT_S),
                                    lambda url: engine, timeout_s=2)
    began = time.monotonic()
    try:
        reason = broadcaster.join("http://stalls")
    finally:
        engine.unstalled.set()
    assert time.monotonic() - began < GROUP_TIMEOUT_S / 2
    assert reason and "no transfer group" in reason and engine.closed and broadcaster.links == {}


class StandInStream:
    """Stand-in for a CUDA stream: an id, and whether work is pending on it."""

    def __init__(self, cuda_stream: int):
        self.cuda_stream, self.pending = cuda_stream, False

    def query(self) -> bool:
        return not self.pending


class StandInPool:
    """Stand-in for torch's stream pool: a few streams handed out round robin, as c10 does with its 32."""

    def __init__(self, size: int):
        self.streams, self.drawn = [StandInStream(i) for i in range(size)], 0

    def draw(self, device: int) -> StandInStream:
        self.drawn += 1
        return self.streams[(self.drawn - 1) % len(self.streams)]


def test_each_nccl_engine_gets_side_streams_no_live_engine_uses():
    pool = StandInPool(6)
    side = SideStreams(pool.draw)
    a, b = side.take("a", 0, 2), side.take("b", 0, 2)
    assert side.take("a", 0, 2) is a  # kept while joined: its allocator blocks are reused
    side.give_back("a")
    b[0].pending = True  # b left with a broadcast stuck on its stream (abandoned)
    side.give_back("b")
    pool.drawn = 0  # the pool wraps round to the streams handed out first
    c = side.take("c", 0, 2)
    pool.drawn = 0  # and again: past c's, live, and b's, busy
    d = side.take("d", 0, 2)
    ids = [s.cuda_stream for s in (*c, *d)]
    assert len(set(ids)) == 4 and b[0].cuda_stream not in ids

"""What the broadcaster does when an engine cannot join (the live path is in test_live_engines.py), and the
snapshot it sends."""

from __future__ import annotations

import time

import torch

from seamlessflow.ports import free_port
from seamlessflow.weights.broadcast import PolicyBroadcaster, SnapshotSource, gloo_init_info
from seamlessflow.weights.engine_client import transfer_client


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

"""The background weight writer: a snapshot later steps cannot change, tied tensors kept tied, one write in
flight, versions handed back in order, and a failed write surfacing on the loop's thread."""

import threading
from pathlib import Path

import pytest
import torch

from seamlessflow.trainer.writer import WeightWriter, host_snapshot


def test_snapshot_is_a_copy_that_keeps_tied_tensors_tied():
    shared = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    state = {"embed.weight": shared, "lm_head.weight": shared, "bias": torch.ones(3)}
    snapshot = host_snapshot(state)
    shared.add_(100.0)  # the next optimizer step, in place
    assert snapshot["embed.weight"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert snapshot["embed.weight"].data_ptr() == snapshot["lm_head.weight"].data_ptr()
    assert snapshot["bias"].data_ptr() != state["bias"].data_ptr()


def test_a_new_version_waits_for_the_previous_write_and_versions_come_back_in_order(tmp_path):
    writer = WeightWriter()
    release = threading.Event()

    def slow_write() -> Path:
        release.wait(5)
        return tmp_path / "v1"

    assert writer.submit(1, 10, slow_write) < 0.5  # nothing in flight: no wait
    assert writer.written() == []  # v1 still being written: nothing to announce
    threading.Timer(0.3, release.set).start()
    waited = writer.submit(2, 20, lambda: tmp_path / "v2")
    assert waited >= 0.2  # bounded: v2's snapshot waited for v1's write rather than queueing behind it
    assert [(p.version, p.step) for p in writer.drain()] == [(1, 10), (2, 20)]
    writer.close()


def test_a_failed_write_raises_where_the_loop_collects_it():
    writer = WeightWriter()

    def broken() -> Path:
        raise OSError("disk full")

    writer.submit(1, 1, broken)
    with pytest.raises(OSError, match="disk full"):
        writer.drain()
    writer.close()

"""The host snapshot of a version: a copy later steps cannot change, tied tensors kept tied."""

import torch

from seamlessflow.weights.snapshot import host_snapshot


def test_snapshot_is_a_copy_that_keeps_tied_tensors_tied():
    shared = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    state = {"embed.weight": shared, "lm_head.weight": shared, "bias": torch.ones(3)}
    snapshot = host_snapshot(state)
    shared.add_(100.0)  # the next optimizer step, in place
    assert snapshot["embed.weight"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    assert snapshot["embed.weight"].data_ptr() == snapshot["lm_head.weight"].data_ptr()
    assert snapshot["bias"].data_ptr() != state["bias"].data_ptr()

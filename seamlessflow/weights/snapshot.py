"""A version's weights as a detached host copy, taken once per version on the step's critical path.

Both ways a version leaves the trainer read this copy: the background file writer
(`seamlessflow.weights.files`) and the live transfer group (`seamlessflow.weights.transfer`), so a late
engine gets exactly version N even after further optimizer steps, and the writer never races the optimizer.
"""

from __future__ import annotations

import torch


def snapshot_needed(backend: str, version: int, files_every: int) -> bool:
    """Whether version `version` needs a host snapshot: its files are due, or the live transfer reads host
    tensors (gloo, or none at all). The NCCL backend streams from the device (`weights.device_source`)."""
    return backend != "nccl" or version % files_every == 0


def host_snapshot(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A detached host copy of ``state`` that keeps tied tensors tied (one copy per storage), so the
    writer sees what the module would have written and later steps cannot change it under the writer."""
    copies: dict[tuple[int, int, tuple[int, ...]], torch.Tensor] = {}
    snapshot = {}
    for name, tensor in state.items():
        key = (tensor.untyped_storage().data_ptr(), int(tensor.storage_offset()), tuple(tensor.shape))
        if key not in copies:
            copies[key] = tensor.detach().to("cpu", copy=True)
        snapshot[name] = copies[key]
    return snapshot

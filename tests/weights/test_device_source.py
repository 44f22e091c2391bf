"""The NCCL path's weight source streams the trainer's own device tensors in bounded buckets, and a version
takes a host snapshot only when its files are due.

No GPU here: the device is simulated by PyTorch's `meta` device (tensors with shapes and dtypes, no storage,
never on the host), and ZeRO-3 by a gather that fills partitioned parameters in and empties them again.
What this checks is placement, bucket bounds and when a copy is made; NCCL itself is not run.
"""

from __future__ import annotations

import contextlib

import torch

from seamlessflow.weights.device_source import DeviceBucketSource
from seamlessflow.weights.snapshot import snapshot_needed

BUCKET = 64 * 64 * 4 + 64 * 4  # one 64x64 float32 layer with its bias


def layers(device: str) -> torch.nn.Module:
    return torch.nn.Sequential(*(torch.nn.Linear(64, 64, device=device) for _ in range(4)),
                               torch.nn.Linear(64, 512, device=device))  # 131 KB: larger than a bucket


def nbytes(tensors) -> int:
    return sum(t.numel() * t.element_size() for t in tensors)


def test_tensors_stay_on_their_device_in_buckets_of_at_most_the_limit():
    module = layers("meta")
    source = DeviceBucketSource(module, BUCKET)
    sent = list(source)
    assert [name for name, _ in sent] == [name for name, _ in module.named_parameters()]
    assert all(t.device.type == "meta" for _, t in sent)  # nothing went through the host
    assert [(m.name, m.shape) for m in source.metadata()] == [(n, tuple(t.shape)) for n, t in sent]
    buckets = [[name for name, _ in bucket] for bucket in source.buckets()]
    assert buckets == [[f"{i}.weight", f"{i}.bias"] for i in range(4)] + [["4.weight"], ["4.bias"]]
    assert all(nbytes(p for _, p in bucket) <= BUCKET or len(bucket) == 1 for bucket in source.buckets())


def test_weights_held_whole_are_sent_as_they_are_with_no_copy():
    module = layers("cpu")  # the device's stand-in whose storage can be compared
    for (name, sent), (_, param) in zip(DeviceBucketSource(module, BUCKET), module.named_parameters(), strict=True):
        assert sent.untyped_storage().data_ptr() == param.untyped_storage().data_ptr(), name


class Partitioned:
    """ZeRO-3 as the source sees it: outside a gather a parameter is an empty partition (its full shape in
    `ds_shape`); a gather fills the bucket's parameters in and empties them again on leaving."""

    def __init__(self, module: torch.nn.Module):
        self.full = {p: p.data.clone() for p in module.parameters()}
        self.gathers: list[int] = []  # bytes gathered at once, per gather
        self.inside = 0
        for p in module.parameters():
            p.ds_shape, p.ds_id = p.shape, id(p)  # type: ignore[attr-defined]
            p.data = torch.empty(0, device=p.device)

    @contextlib.contextmanager
    def gather(self, params):
        assert self.inside == 0, "a bucket gathered while another is still gathered"
        self.inside += 1
        self.gathers.append(nbytes(self.full[p] for p in params))
        for p in params:
            p.data = self.full[p]
        yield
        for p in params:
            p.data = torch.empty(0, device=p.device)
        self.inside -= 1


def test_under_zero3_each_bucket_is_gathered_alone_and_copied_before_it_is_released():
    module = layers("cpu")
    zero3 = Partitioned(module)
    sent = dict(DeviceBucketSource(module, BUCKET, gather=zero3.gather))
    assert zero3.gathers == [BUCKET] * 4 + [64 * 512 * 4, 512 * 4]  # a bucket at a time (one too-big tensor alone)
    for param, full in zero3.full.items():
        name = next(n for n, p in module.named_parameters() if p is param)
        torch.testing.assert_close(sent[name], full)  # whole, though the partition is empty again
        assert param.numel() == 0


def test_a_host_snapshot_only_when_files_are_due_on_the_nccl_path():
    assert [snapshot_needed("nccl", v, files_every=3) for v in range(1, 7)] == [False, False, True] * 2
    assert all(snapshot_needed(backend, v, files_every=3) for backend in ("gloo", "none") for v in range(1, 7))

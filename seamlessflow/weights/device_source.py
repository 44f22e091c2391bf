"""The trainer's weights for vLLM's NCCL trainer engine, straight from its device memory, bucket by bucket.

vLLM's packed NCCL producer packs the source's tensors on their own device and broadcasts CUDA tensors, so
handing it the version's host snapshot could only fail on a GPU, and even with a copy it would stage every
version through host memory (a 7B model in bf16: 15 GB out and back per version). `DeviceBucketSource`
yields the module's own parameters instead, in buckets of at most `bucket_bytes` (one tensor larger than
that goes alone), cut by `core.buckets.plan_buckets` from the full shapes. Parameters that the module holds
whole (ZeRO 0-2, one rank) are yielded as they are, with no copy: the step waits for the delivery, so they
cannot change under it. Under ZeRO-3 each bucket is gathered (`gather`, a collective: DeepSpeed's
`GatheredParameters`), cloned on the device while gathered, and released before the next bucket is gathered:
at most one gathered bucket and the clones of one on the device, never the whole model on one device or on
the host.

The producer packs what it pulls on CUDA side streams of its own, so every read is fenced against the step's
stream (`weights.stream_fence`): gathers and clones run on the step's stream, a gather is released only once
its clones are done, and each tensor is handed over with its reader waiting for the step's stream.

A host snapshot is then taken only when the version's files are due (`files_every`, `snapshot.snapshot_needed`); the
transfer of a version without files streams from the device alone. Not run on a GPU here (none lent to this
project's tests): the unit tests run it on the `meta` device, which checks placement and bucket bounds, not
NCCL.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager

import torch
from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource

from seamlessflow.core.buckets import plan_buckets
from seamlessflow.weights.stream_fence import Fence, fenced, stream_fence

Gather = Callable[[Sequence[torch.nn.Parameter]], AbstractContextManager[object]]


def full_shape(param: torch.Tensor) -> tuple[int, ...]:
    """A parameter's whole shape, also under ZeRO-3, where the local tensor is a partition."""
    return tuple(getattr(param, "ds_shape", param.shape))


def zero3_gather(params: Sequence[torch.nn.Parameter]) -> AbstractContextManager[object]:
    """DeepSpeed's gather of ZeRO-3 partitions for the duration of a `with` (every rank must join it)."""
    import deepspeed

    return deepspeed.zero.GatheredParameters(list(params), modifier_rank=None)


def _no_gather(params: Sequence[torch.nn.Parameter]) -> AbstractContextManager[object]:
    return contextlib.nullcontext()


def _device_of(params: Sequence[torch.nn.Parameter], partitioned: bool) -> torch.device:
    """Where the tensors handed over live: the parameters' device; under ZeRO-3 (whose partitions may be
    offloaded to the host) the gathered ones are on the current CUDA device whenever there is one."""
    if partitioned and torch.cuda.is_available():
        return torch.device("cuda", torch.cuda.current_device())
    return params[0].device if params else torch.device("cpu")


class DeviceBucketSource(WeightSource):
    """The module's parameters where they live, bucket by bucket (see the module's docstring)."""

    def __init__(self, module: torch.nn.Module, bucket_bytes: int, gather: Gather | None = None,
                 fence: Fence | None = None):
        """Build it in the trainer's thread after the step: the fence's writer is the stream current then."""
        self.params = list(module.named_parameters())
        self.bucket_bytes = bucket_bytes
        partitioned = any(hasattr(p, "ds_id") for _, p in self.params)
        self.gather = gather or (zero3_gather if partitioned else _no_gather)
        self.copies = gather is not None or partitioned  # gathered storage is freed after its bucket
        self._gathering = threading.Lock()  # each engine's send iterates in a thread of its own
        self.fence = fence or stream_fence(_device_of([p for _, p in self.params], partitioned))

    def metadata(self) -> list[ParamMeta]:
        return [ParamMeta(name, p.dtype, full_shape(p)) for name, p in self.params]

    def buckets(self) -> list[list[tuple[str, torch.nn.Parameter]]]:
        sizes = [torch.Size(full_shape(p)).numel() * p.element_size() for _, p in self.params]
        cut, start = [], 0
        for count in plan_buckets(sizes, self.bucket_bytes):
            cut.append(self.params[start:start + count])
            start += count
        return cut

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        for bucket in self.buckets():
            yield from fenced(self.fence, self._take(bucket))

    def _take(self, bucket: list[tuple[str, torch.nn.Parameter]]) -> list[tuple[str, torch.Tensor]]:
        """The bucket's tensors: gathered and cloned on the step's stream, the gather released only after the
        clones are done (`Fence.settle`); parameters held whole as they are."""
        with self._gathering, self.fence.writing(), self.gather([p for _, p in bucket]):
            tensors = [(name, p.detach().clone() if self.copies else p.detach()) for name, p in bucket]
            if self.copies:
                self.fence.settle()
        return tensors

"""Stream ordering between the trainer's CUDA stream and vLLM's packed NCCL producer.

Why: `packed_nccl_broadcast_producer` pulls the source's tensors (`next()` on the source's iterator) inside
`torch.cuda.stream(side)`, one of its own cached side streams, and packs them there (`torch.cat`) before
broadcasting. CUDA orders work only within a stream, so without a fence:
- the side stream may pack a parameter before the optimizer's update of it, queued on the trainer's stream
  (the stream current where the step ran), has run;
- a copy the source made (ZeRO-3: each gathered bucket is cloned) is freed back to the caching allocator
  on the stream that allocated it once the producer drops it, and the next bucket's clone on that stream may
  reuse its memory while the side stream's pack of it is still queued;
- a ZeRO-3 gather released while its clone is still queued lets the next gather overwrite the gathered
  buffer before it is copied.

`StreamFence` states each of those orders once. The source's copies and gathers run on the writer stream
(`writing`): the same stream as the step, so they follow the optimizer's writes; the gather is released
only after the host has seen the writer's queued work done (`settle`: an event recorded after the clones,
synchronized); and every tensor is handed over (`hand_over`) by making the stream that pulls it (current at
the `next()`, which differs per packed buffer) wait for the writer stream and by marking the tensor used on
that stream (`record_stream`), so its memory is not reused before the pack has read it. `NoFence` is the
same calls for tensors off CUDA (CPU, `meta`), where every op is ordered already. The streams and the
`record_stream` call are injected, so a CPU test can watch the order of the calls.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any, Protocol

import torch


class Event(Protocol):
    """What the fence asks of an event (`torch.cuda.Event` has it): the host waits for it."""

    def synchronize(self) -> None: ...


class Stream(Protocol):
    """What the fence asks of a stream (`torch.cuda.Stream` has it)."""

    def wait_stream(self, stream: Any) -> None: ...

    def record_event(self) -> Event: ...


class Fence(Protocol):
    """The three orders the source keeps (see the module docstring)."""

    def writing(self) -> AbstractContextManager[object]: ...

    def settle(self) -> None: ...

    def hand_over(self, tensor: torch.Tensor) -> torch.Tensor: ...


class NoFence:
    """The fence's calls where no stream orders anything (CPU and `meta` tensors): all no-ops."""

    def writing(self) -> AbstractContextManager[object]:
        return contextlib.nullcontext()

    def settle(self) -> None:
        return None

    def hand_over(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor


class StreamFence:
    """Orders the source's reads after the trainer's writes on CUDA (see the module docstring). ``writer`` is
    the stream the optimizer step ran on; ``current`` gives the stream current in the calling thread (the
    producer's side stream during a `next()`); ``record`` marks a tensor as used on a stream."""

    def __init__(self, writer: Stream, current: Callable[[], Stream],
                 record: Callable[[torch.Tensor, Any], None],
                 enter: Callable[[Any], AbstractContextManager[object]]) -> None:
        self.writer, self.current, self.record, self.enter = writer, current, record, enter

    def writing(self) -> AbstractContextManager[object]:
        """Gathers and copies queued on the writer stream, after the step's updates."""
        return self.enter(self.writer)

    def settle(self) -> None:
        """Block until the writer's queued work (the clones of a gathered bucket) is done: before a gather is
        released, so that the next gather cannot overwrite what is still being copied."""
        self.writer.record_event().synchronize()

    def hand_over(self, tensor: torch.Tensor) -> torch.Tensor:
        """The stream about to read ``tensor`` waits for all the writer has queued, and the allocator keeps
        ``tensor``'s memory until that stream's work queued so far is done."""
        reader = self.current()
        reader.wait_stream(self.writer)
        self.record(tensor, reader)
        return tensor


def _record_stream(tensor: torch.Tensor, stream: Any) -> None:
    tensor.record_stream(stream)


def stream_fence(device: torch.device) -> Fence:
    """The fence for tensors on ``device``; on CUDA the writer is the stream current here and now, so build
    it in the trainer's thread right after the step (the producer iterates in threads of its own)."""
    if device.type != "cuda":
        return NoFence()
    return StreamFence(torch.cuda.current_stream(device), lambda: torch.cuda.current_stream(device),
                       _record_stream, torch.cuda.stream)


def fenced(fence: Fence, pairs: list[tuple[str, torch.Tensor]]) -> Iterator[tuple[str, torch.Tensor]]:
    """``pairs`` handed over one at a time, each just before the consumer gets it (the stream pulling each
    can differ: the producer starts a new packed buffer on another stream mid-bucket)."""
    for name, tensor in pairs:
        yield name, fence.hand_over(tensor)

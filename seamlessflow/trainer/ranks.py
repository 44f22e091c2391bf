"""The trainer's data-parallel group as seen by the loop: who leads, and how the leader hands out work.

Why a separate gloo group: what travels here are Python objects (a step's sequences, a checkpoint tag,
a stop), pickled by torch.distributed's object collectives. On a gloo group they stay in host memory
whatever the training backend is (NCCL would stage them through the GPU), and they never interleave with
DeepSpeed's gradient collectives. One rank (0) reads Kafka and decides; the others only follow.
"""

from __future__ import annotations

import os
from typing import Any

import torch
import torch.distributed as dist


def launched_ranks() -> int:
    """WORLD_SIZE as set by a launcher (torchrun, deepspeed); 1 for a lone process."""
    return int(os.environ.get("WORLD_SIZE", "1"))


class RankGroup:
    """Rank and world size of the (already initialised) default group, and object collectives on gloo."""

    def __init__(self) -> None:
        ready = dist.is_available() and dist.is_initialized()
        self.rank = dist.get_rank() if ready else 0
        self.world = dist.get_world_size() if ready else 1
        self._group = dist.new_group(backend="gloo") if self.world > 1 else None

    @property
    def leader(self) -> bool:
        return self.rank == 0

    def broadcast(self, value: Any = None) -> Any:
        """The leader's ``value`` on every rank (followers pass nothing)."""
        if self.world == 1:
            return value
        box = [value if self.leader else None]
        dist.broadcast_object_list(box, src=0, group=self._group)
        return box[0]

    def barrier(self) -> None:
        """Every rank got here (a store upload waits for all the parts)."""
        if self.world > 1:
            dist.barrier(group=self._group)

    def scatter(self, shares: list[Any] | None = None) -> Any:
        """``shares[r]`` to rank r; the leader passes one share per rank, followers pass nothing."""
        if self.world == 1:
            assert shares is not None, "the only rank is the leader: it passes its share"
            return shares[0]
        out = [None]
        dist.scatter_object_list(out, shares if self.leader else None, src=0, group=self._group)
        return out[0]

    def sum(self, values: list[float]) -> list[float]:
        """Element-wise sum over ranks (float64, so step figures add up exactly enough)."""
        if self.world == 1:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor, group=self._group)
        return tensor.tolist()

    def max(self, value: int) -> int:
        if self.world == 1:
            return value
        tensor = torch.tensor([value], dtype=torch.int64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self._group)
        return int(tensor.item())

    def maxima(self, values: list[float]) -> list[float]:
        """Element-wise max over ranks."""
        if self.world == 1:
            return list(values)
        tensor = torch.tensor(values, dtype=torch.float64)
        dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=self._group)
        return tensor.tolist()

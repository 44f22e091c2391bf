"""vLLM's dense NCCL weight-transfer protocol carried over gloo, so CPU engines (and CI) take the same path.

Same handshake as `vllm.distributed.weight_transfer.nccl_engine`: the trainer opens a TCP rendezvous as
rank 0 while the engine joins it from `/init_weight_transfer_engine`; each round the trainer calls
`/start_weight_update`, runs `/update_weights` (names, dtypes, shapes) concurrently with its broadcasts,
then `/finish_weight_update`, and the engine loads what it receives through vLLM's layerwise reload. The
stream is cut into buckets by `seamlessflow.core.buckets` from the metadata, identically on both ends, so
peak transfer memory is one bucket on each side. Buffers are always CPU tensors (gloo), so this also works
for a GPU engine, only slower than NCCL.

Groups are built directly (a `TCPStore` and a `ProcessGroupGloo`), never through
`torch.distributed.init_process_group`: an engine may already own the default group, and a trainer talks
to several engines, one group each.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import threading
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any, ClassVar, Self, TypeVar, cast

import torch
import torch.distributed as dist
from vllm.distributed.weight_transfer.base import (
    ParamMeta,
    TrainerInitInfo,
    TrainerWeightTransferEngine,
    VLLMWeightSyncClient,
    WeightSource,
    WeightTransferEngine,
    WeightTransferInitInfo,
    WeightTransferUpdateInfo,
)
from vllm.distributed.weight_transfer.packed_tensor import unpack_tensor

from seamlessflow.core.buckets import plan_buckets
from seamlessflow.weights.plugin import BACKEND

DEFAULT_BUCKET_BYTES = 64 << 20
DEFAULT_TIMEOUT_S = 120.0

T = TypeVar("T")


def abandonable(call: Callable[[], T], name: str = "weight-transfer") -> cf.Future[T]:
    """`call` in a daemon thread, its outcome as a future. A peer that stalls mid-transfer blocks the thread
    that talks to it for as long as it stalls; whoever waits on the future may give up and abandon the thread,
    which then holds back neither them nor the interpreter's exit (a ThreadPoolExecutor's threads are joined at
    both)."""
    future: cf.Future[T] = cf.Future()

    def run() -> None:
        try:
            future.set_result(call())
        except BaseException as exc:  # the waiter decides what it means
            future.set_exception(exc)

    threading.Thread(target=run, name=name, daemon=True).start()
    return future


@dataclass(kw_only=True)
class GlooWeightTransferInitInfo(WeightTransferInitInfo):
    """What the engine needs to join: the trainer's rendezvous, its own rank offset, the wire params."""

    master_address: str
    master_port: int
    rank_offset: int
    world_size: int
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass
class GlooTrainerInitInfo(TrainerInitInfo):
    """Trainer side: the rendezvous it opens as rank 0; the wire params it hands to the engine."""

    backend: ClassVar[str] = BACKEND

    master_address: str
    master_port: int
    world_size: int
    bucket_bytes: int = DEFAULT_BUCKET_BYTES
    timeout_s: float = DEFAULT_TIMEOUT_S


@dataclass
class GlooWeightTransferUpdateInfo(WeightTransferUpdateInfo):
    """One round's parameter metadata, as in the NCCL backend."""

    names: list[str]
    dtype_names: list[str]
    shapes: list[list[int]]

    def __post_init__(self) -> None:
        if not len(self.names) == len(self.dtype_names) == len(self.shapes):
            raise ValueError("names, dtype_names and shapes must have the same length")

    def metas(self) -> list[ParamMeta]:
        described = zip(self.names, self.dtype_names, self.shapes, strict=True)
        return [ParamMeta(name, getattr(torch, dtype), tuple(shape)) for name, dtype, shape in described]


class GlooGroup:
    """A two-or-more-rank gloo group outside torch's global state; rank 0 hosts the store."""

    def __init__(self, address: str, port: int, rank: int, world_size: int, timeout_s: float):
        timeout = timedelta(seconds=timeout_s)
        self.store = dist.TCPStore(address, port, world_size, is_master=rank == 0, timeout=timeout)
        # torch's stubs omit the backend-level collectives; broadcast below is ProcessGroupGloo's own.
        self.group: Any = dist.ProcessGroupGloo(dist.PrefixStore("weights", self.store), rank, world_size, timeout)

    def broadcast(self, tensor: torch.Tensor) -> None:
        self.group.broadcast([tensor], dist.BroadcastOptions()).wait()  # root rank 0


def nbytes(meta: ParamMeta) -> int:
    return math.prod(meta.shape) * meta.dtype.itemsize


def bucketed(metas: list[ParamMeta], limit: int) -> Iterator[list[ParamMeta]]:
    start = 0
    for count in plan_buckets([nbytes(m) for m in metas], limit):
        yield metas[start:start + count]
        start += count


class GlooWeightTransferEngine(WeightTransferEngine[GlooWeightTransferInitInfo, GlooWeightTransferUpdateInfo]):
    """Engine side: receives each bucket into a fresh CPU buffer and loads it into the model."""

    init_info_cls = GlooWeightTransferInitInfo
    update_info_cls = GlooWeightTransferUpdateInfo

    def __init__(self, config: Any, vllm_config: Any, device: torch.device, model: torch.nn.Module) -> None:
        super().__init__(config, vllm_config, device, model)
        self.group: GlooGroup | None = None
        self.bucket_bytes = DEFAULT_BUCKET_BYTES

    def init_transfer_engine(self, init_info: GlooWeightTransferInitInfo) -> None:
        parallel = self.parallel_config
        worker_rank = parallel.data_parallel_index * parallel.world_size + parallel.rank
        self.bucket_bytes = init_info.bucket_bytes
        self.group = GlooGroup(init_info.master_address, init_info.master_port, worker_rank + init_info.rank_offset,
                               init_info.world_size, init_info.timeout_s)

    def start_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import initialize_layerwise_reload

        initialize_layerwise_reload(self.model)

    def finish_weight_update(self) -> None:
        from vllm.model_executor.model_loader.reload import finalize_layerwise_reload

        finalize_layerwise_reload(self.model, self.model_config)

    def update_weights(self, update_info: dict[str, Any]) -> None:
        # The base class ends with torch.accelerator.synchronize(), which raises on a CPU-only host;
        # gloo's broadcast has completed when wait() returns, so there is nothing to synchronize.
        self.receive_weights(self.parse_update_info(update_info))

    def receive_weights(self, update_info: GlooWeightTransferUpdateInfo) -> None:
        if self.group is None:
            raise RuntimeError("gloo weight transfer not initialized; call init_weight_transfer_engine first")
        from vllm.model_executor.model_loader.mtp_validation import disable_mtp_completeness_check

        with disable_mtp_completeness_check():
            for bucket in bucketed(update_info.metas(), self.bucket_bytes):
                sizes = [nbytes(m) for m in bucket]
                buffer = torch.empty(sum(sizes), dtype=torch.uint8)
                self.group.broadcast(buffer)
                weights = unpack_tensor(buffer, [m.name for m in bucket], [list(m.shape) for m in bucket],
                                        [m.dtype for m in bucket], sizes)
                cast(Any, self.model).load_weights(weights)

    def shutdown(self) -> None:
        self.group = None


class GlooTrainerWeightTransferEngine(TrainerWeightTransferEngine[GlooTrainerInitInfo]):
    """Trainer side: rank 0 packs each bucket and broadcasts it while the engine's `/update_weights` runs."""

    init_info_cls = GlooTrainerInitInfo

    def __init__(self, *, client: VLLMWeightSyncClient, source: WeightSource, is_sender: bool = True,
                 bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> None:
        super().__init__(client=client, source=source, is_sender=is_sender)
        self.bucket_bytes = bucket_bytes
        self.group: GlooGroup | None = None

    @classmethod
    def trainer_init(cls, init_info: GlooTrainerInitInfo, *, client: VLLMWeightSyncClient,
                     source: WeightSource | None = None) -> Self:
        if source is None:
            raise ValueError("the gloo trainer engine needs a WeightSource")
        engine = cls(client=client, source=source, is_sender=init_info.is_sender, bucket_bytes=init_info.bucket_bytes)
        if not engine.is_sender:
            return engine
        worker_info = GlooWeightTransferInitInfo(
            master_address=init_info.master_address, master_port=init_info.master_port, rank_offset=1,
            world_size=init_info.world_size, bucket_bytes=init_info.bucket_bytes, timeout_s=init_info.timeout_s)
        # The engine blocks in its init until the group forms, so both sides run at once; whichever fails
        # first (an engine that rejects the request, say) ends the wait instead of the rendezvous timeout.
        joined = abandonable(lambda: client.init_weight_transfer_engine(asdict(worker_info)))
        opened = abandonable(lambda: GlooGroup(init_info.master_address, init_info.master_port, 0,
                                               init_info.world_size, init_info.timeout_s))
        pending: list[cf.Future[Any]] = [joined, opened]
        cf.wait(pending, return_when=cf.FIRST_EXCEPTION)
        joined.result()
        engine.group = opened.result()
        return engine

    def send_weights(self) -> None:
        assert self.source is not None
        meta = self.source.metadata()
        if not self.is_sender:
            for _ in self.source:  # stay in the trainer-side gather collectives
                pass
            return
        names = [m.name for m in meta]
        update = GlooWeightTransferUpdateInfo(names, [str(m.dtype).removeprefix("torch.") for m in meta],
                                              [list(m.shape) for m in meta])
        self.client.start_weight_update()
        # A receiver stuck after a failed broadcast must not hang us, nor our exit: its thread is abandoned.
        receiving = abandonable(lambda: self.client.update_weights(asdict(update)))
        self._broadcast(meta, receiving)
        receiving.result()
        self.client.finish_weight_update()

    def _broadcast(self, meta: list[ParamMeta], receiving: cf.Future) -> None:
        assert self.group is not None and self.source is not None, "trainer_init() first"
        pairs = iter(self.source)
        for bucket in bucketed(meta, self.bucket_bytes):
            if receiving.done():
                receiving.result()  # the engine refused the round: raise instead of waiting for a peer
            chunk = []
            for expected in bucket:
                name, tensor = next(pairs)
                if name != expected.name or tensor.dtype != expected.dtype or tuple(tensor.shape) != expected.shape:
                    raise ValueError(f"WeightSource yielded {name!r} {tensor.dtype} {tuple(tensor.shape)}, metadata "
                                     f"declared {expected.name!r} {expected.dtype} {expected.shape}")
                chunk.append(tensor.detach().to("cpu").contiguous().view(-1).view(torch.uint8))
            self.group.broadcast(torch.cat(chunk))

    def shutdown(self) -> None:
        self.group = None

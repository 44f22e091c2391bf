"""The publishing trainer rank's side: each new policy version into every engine that serves the policy.

Each engine gets its own transfer group (trainer rank 0, engine rank 1), so an engine that dies or stalls
mid-transfer breaks only its own group: the others finish, and the failed one is reported (`on_failed`)
so it can be taken out of routing and caught up from files. Per engine and version: hold it at the proxies
(`fence`: they cut its streams and stop routing to it), pause (`keep`), vLLM's start/update/finish through
the transfer engine, drop the prefix cache (its KV was computed by the old weights), label the version,
release it at the proxies with the new version, resume. Every token the proxies read from the engine before
the hold is of the old weights, every one after the release of the new ones (`weights.fence` says why);
agents see only a pause.

A stalled engine (no version `timeout_s` after its send began, or no group that long after its join began)
is dropped from that version: `send` returns without waiting for it and reports it failed. Its HTTP client
is closed at once, so its thread's next call fails instead of resuming an engine reported failed (it stays
paused and held), and its group is shut down in the background. The thread blocked in that group is
abandoned: a daemon thread nobody waits for, ended by gloo's own timeout or the NCCL communicator's abort.
The NCCL sender broadcasts on CUDA side streams of each engine's own (`OwnStreamsNCCLTrainer`): vLLM's
packed producer takes its streams from one per-process cache, where every engine's broadcasts would queue
behind a stalled one's.

The backend is whatever vLLM's trainer factory knows: `gloo` (this package, CPU) or `nccl` (GPU engines
started with `--weight-transfer-config '{"backend": "nccl"}'`); `init_info_for` builds the trainer-side info.

The engine's HTTP client is passed in (`connect`, an `EngineLink`: `engine_client.transfer_client` in a
trainer, a stand-in in a test).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, Self

import torch
from vllm.distributed.weight_transfer.base import (
    ModuleSource,
    ParamMeta,
    TrainerInitInfo,
    TrainerWeightTransferEngine,
    VLLMWeightSyncClient,
    WeightSource,
)
from vllm.distributed.weight_transfer.factory import WeightTransferTrainerFactory
from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo, NCCLTrainerWeightTransferEngine
from vllm.distributed.weight_transfer.packed_tensor import PackedChunk, pack_tensors

from seamlessflow.core.control import PauseMode
from seamlessflow.ports import free_port
from seamlessflow.weights.fence import NoFence, VersionFence
from seamlessflow.weights.gloo import DEFAULT_BUCKET_BYTES, GlooTrainerInitInfo, abandonable
from seamlessflow.weights.plugin import register

log = logging.getLogger(__name__)

DEFAULT_SEND_TIMEOUT_S = 300.0  # one version into one engine; ~0.5 GB/s over gloo on loopback: 70B bf16 in ~280 s


class EngineLink(VLLMWeightSyncClient, Protocol):
    """What the broadcaster asks of an engine's HTTP API besides vLLM's transfer routes."""

    def pause(self, mode: PauseMode) -> None: ...

    def resume(self) -> None: ...

    def reset_prefix_cache(self, reset_running: bool) -> bool: ...

    def set_weight_version(self, version: int) -> None: ...

    def close(self) -> None: ...


class SnapshotSource(WeightSource):
    """A version's host snapshot as vLLM's `WeightSource`: every tensor once, in the snapshot's order."""

    def __init__(self, state: dict[str, torch.Tensor] | None = None) -> None:
        self.state: dict[str, torch.Tensor] = state if state is not None else {}

    def metadata(self) -> list[ParamMeta]:
        return [ParamMeta(name, t.dtype, tuple(t.shape)) for name, t in self.state.items()]

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        yield from self.state.items()


def gloo_init_info(host: str, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                   timeout_s: float = DEFAULT_SEND_TIMEOUT_S) -> Callable[[], TrainerInitInfo]:
    """A fresh rendezvous (new port) per engine on `host`, the address the engines reach the trainer at;
    `timeout_s` bounds the rendezvous and each broadcast (so an abandoned thread ends too)."""
    return lambda: GlooTrainerInitInfo(host, free_port(), 2, bucket_bytes=bucket_bytes, timeout_s=timeout_s, rank=0)


class SideStreams:
    """CUDA side streams per engine, none shared by two live engines. torch hands streams out round robin from
    a pool of 32 per device, so one drawn for an engine that joins later may be one a live engine still uses;
    such a stream is drawn past, and so is one with work pending (an abandoned engine's stalled broadcast).
    An engine keeps its streams while joined: the caching allocator's blocks, kept per stream, are reused
    from version to version (why vLLM caches its streams, gh-52950)."""

    POOL = 32  # torch's streams per device and priority (c10's kStreamsPerPool)

    def __init__(self, draw: Callable[[int], Any] | None = None):
        self.draw = draw or (lambda device: torch.cuda.Stream(device=device))
        self.held: dict[object, tuple[Any, ...]] = {}
        self.lock = threading.Lock()

    def take(self, owner: object, device: int, count: int) -> tuple[Any, ...]:
        with self.lock:
            if owner not in self.held:
                self.held[owner] = self._free(device, count)
            return self.held[owner]

    def give_back(self, owner: object) -> None:
        with self.lock:
            self.held.pop(owner, None)

    def _free(self, device: int, count: int) -> tuple[Any, ...]:
        busy = {s.cuda_stream for streams in self.held.values() for s in streams}
        picked: list[Any] = []
        for _ in range(self.POOL):
            stream = self.draw(device)
            if stream.cuda_stream not in busy and stream.query():
                busy.add(stream.cuda_stream)
                picked.append(stream)
                if len(picked) == count:
                    return tuple(picked)
        log.warning("no free CUDA side stream left on device %d: this engine's transfer shares streams with "
                    "another's (one's stall queues the other's)", device)
        return tuple(picked) + tuple(self.draw(device) for _ in range(count - len(picked)))


def packed_broadcast(pairs: Iterator[tuple[str, torch.Tensor]], group: Any, streams: tuple[Any, ...],
                     buffer_bytes: int) -> None:
    """vLLM's `packed_nccl_broadcast_producer` on the streams given: the same chunks (its `pack_tensors`, so
    the engine's consumer cuts them alike), each broadcast on the next stream; a stream's last chunk is kept
    until the stream has been synchronized."""
    in_flight: list[PackedChunk | None] = [None] * len(streams)
    slot = 0
    while True:
        streams[slot].synchronize()
        in_flight[slot] = None
        with torch.cuda.stream(streams[slot]):
            chunk = pack_tensors(pairs, lambda item: item[1], buffer_bytes)
            if chunk is None:
                break
            group.broadcast(chunk.packed_tensor, src=0)
            in_flight[slot] = chunk
        slot = (slot + 1) % len(streams)
    for stream in streams:
        stream.synchronize()


@dataclass
class OwnStreamsNCCLInitInfo(NCCLTrainerInitInfo):
    """vLLM's NCCL init info, and where the sender draws its side streams from (shared by the engines)."""

    streams: SideStreams = field(default_factory=SideStreams, kw_only=True)


class OwnStreamsNCCLTrainer(NCCLTrainerWeightTransferEngine):
    """vLLM's NCCL sender, its packed broadcasts on side streams of this engine's own (`SideStreams`): vLLM's
    producer takes its streams from a per-process cache (`packed_tensor._get_streams`), so a broadcast stuck
    in one engine's group would hold every other engine's behind it on the same streams. Streams do not help
    where the device has one hardware queue (`CUDA_DEVICE_MAX_CONNECTIONS=1`): a stuck kernel holds all."""

    side: SideStreams

    @classmethod
    def trainer_init(cls, init_info: OwnStreamsNCCLInitInfo, *,  # type: ignore[override]
                     client: VLLMWeightSyncClient, source: WeightSource | None = None) -> Self:
        engine = super().trainer_init(init_info, client=client, source=source)
        engine.side = init_info.streams
        return engine

    def _broadcast(self, source: WeightSource, meta: list[ParamMeta]) -> None:
        if not (self.is_sender and self.packed):
            return super()._broadcast(source, meta)
        assert self.model_update_group is not None, "trainer_init() first"
        streams = self.side.take(self, torch.accelerator.current_device_index(), self.packed_num_buffers)
        packed_broadcast(self._checked_iter(source, meta), self.model_update_group, streams,
                         self.packed_buffer_size_bytes)

    def shutdown(self) -> None:
        super().shutdown()  # aborts the communicator, which ends a broadcast stuck on our streams
        self.side.give_back(self)


def nccl_init_info(host: str, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> Callable[[], TrainerInitInfo]:
    """vLLM's own NCCL backend (GPU trainer and engines), packed in buckets of `bucket_bytes`, each engine's
    broadcasts on side streams of its own. vLLM's NCCL rendezvous has no timeout of its own: the broadcaster's
    bounds the trainer's wait. Configured, not run here: no GPU with vLLM was available to this project's tests."""
    streams = SideStreams()
    return lambda: OwnStreamsNCCLInitInfo(host, free_port(), 2, packed=True, packed_buffer_size_bytes=bucket_bytes,
                                          rank=0, streams=streams)


def init_info_for(backend: str, host: str, bucket_bytes: int = DEFAULT_BUCKET_BYTES,
                  timeout_s: float = DEFAULT_SEND_TIMEOUT_S) -> Callable[[], TrainerInitInfo]:
    if backend == "nccl":
        return nccl_init_info(host, bucket_bytes)
    if backend == "gloo":
        return gloo_init_info(host, bucket_bytes, timeout_s)
    raise ValueError(f"no trainer-side setup for weight-transfer backend {backend!r} (gloo or nccl)")


def open_group(init_info: TrainerInitInfo, client: EngineLink, source: WeightSource) -> TrainerWeightTransferEngine:
    """vLLM's trainer factory, except that NCCL's sender is `OwnStreamsNCCLTrainer` (the factory knows vLLM's)."""
    if isinstance(init_info, OwnStreamsNCCLInitInfo):
        return OwnStreamsNCCLTrainer.trainer_init(init_info, client=client, source=source)
    return WeightTransferTrainerFactory.trainer_init(init_info, client=client, source=source)


@dataclass
class Delivery:
    """One version's outcome: which engines have it (and in how many seconds each), which failed and why."""

    version: int
    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


class PolicyBroadcaster:
    """Engines join once (`join`), then every `send` delivers a version to all of them concurrently.
    `connect(url)` opens an engine's HTTP client (`seamlessflow.weights.engine_client.transfer_client`), whose calls
    must wait as long as a whole version takes to arrive. `timeout_s` bounds each engine's join and send."""

    def __init__(self, module: torch.nn.Module | None, init_info: Callable[[], TrainerInitInfo],
                 connect: Callable[[str], EngineLink],
                 on_failed: Callable[[str, str], None] = lambda url, reason: None,
                 source_for: Callable[[str], WeightSource] | None = None, fence: VersionFence | None = None,
                 timeout_s: float = DEFAULT_SEND_TIMEOUT_S):
        register()
        self.init_info, self.connect, self.on_failed, self.timeout_s = init_info, connect, on_failed, timeout_s
        self.fence = fence or NoFence()
        if source_for is None:
            if module is None:
                raise ValueError("a module or a source_for function is needed")
            whole = module
            source_for = lambda url: ModuleSource(whole)  # noqa: E731
        self.source_for = source_for
        self.links: dict[str, tuple[EngineLink, TrainerWeightTransferEngine]] = {}

    def join(self, url: str) -> str | None:
        """Open a transfer group with the engine at `url`: None when joined, else why not (use files)."""
        client = self.connect(url)
        opening = abandonable(lambda: open_group(self.init_info(), client, self.source_for(url)), f"join {url}")
        try:
            engine = opening.result(timeout=self.timeout_s)
        except Exception as exc:  # any failure to form the group means: this engine takes files
            client.close()
            why = str(exc) or type(exc).__name__
            if not opening.done():
                why = f"no transfer group within {self.timeout_s:g} s"
                opening.add_done_callback(shut_late)
            log.warning("engine %s cannot join the transfer group: %s", url, why)
            return why
        self.links[url] = (client, engine)
        return None

    def leave(self, url: str) -> None:
        client, engine = self.links.pop(url, (None, None))
        if engine is not None:
            engine.shutdown()
        if client is not None:
            client.close()

    def abandon(self, url: str) -> None:
        """Leave a stalled engine without waiting for it: its client is closed at once (its thread's next call
        fails, so that thread never resumes the engine), its group shut down in the background (an NCCL abort
        may wait seconds)."""
        client, engine = self.links.pop(url)
        client.close()
        abandonable(engine.shutdown, f"shutdown {url}")

    def send(self, version: int, only: Collection[str] | None = None) -> Delivery:
        """Deliver `version` to every joined engine (or those of `only`, URLs: a catch-up), each within
        `timeout_s`; a failed or stalled engine is dropped and reported."""
        delivery = Delivery(version)
        links = {url: link for url, link in self.links.items() if only is None or url in only}
        if not links:
            return delivery
        running = {url: abandonable(partial(self._deliver, url, client, engine, version), f"send {url}")
                   for url, (client, engine) in links.items()}
        done, _ = cf.wait(running.values(), timeout=self.timeout_s)
        stalled = {url for url, future in running.items() if future not in done}
        for url, future in running.items():
            if url in stalled:
                delivery.failed[url] = f"stalled: no version taken within {self.timeout_s:g} s"
            elif (exc := future.exception()) is not None:
                delivery.failed[url] = str(exc) or type(exc).__name__
            else:
                delivery.seconds[url] = future.result()
        for url, reason in delivery.failed.items():
            log.error("engine %s failed to take version %d: %s", url, version, reason)
            if url in stalled:
                self.abandon(url)
            else:
                self.leave(url)
            self.on_failed(url, reason)
        return delivery

    def _deliver(self, url: str, client: EngineLink, engine: TrainerWeightTransferEngine, version: int) -> float:
        began = time.monotonic()
        self.fence.hold(url)
        client.pause(PauseMode.KEEP)
        engine.send_weights()
        if not client.reset_prefix_cache(reset_running=True):
            raise RuntimeError("the prefix cache could not be reset (stale KV would be reused)")
        client.set_weight_version(version)
        self.fence.release(url, version)  # before the resume: no token of the new weights under the old label
        # Resumed (and released) only on success: an engine with half a version must not generate another token.
        client.resume()
        return time.monotonic() - began


def shut_late(opening: cf.Future) -> None:
    """A group that formed after its join was given up on: nobody will send over it."""
    if opening.exception() is None:
        opening.result().shutdown()

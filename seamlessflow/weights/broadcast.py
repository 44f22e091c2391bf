"""The publishing trainer rank's side: each new policy version into every engine that serves the policy.

Each engine gets its own transfer group (trainer rank 0, engine rank 1), so an engine that dies or stalls
mid-transfer breaks only its own group: the others finish, and the failed one is reported (`on_failed`)
so it can be taken out of routing and caught up from files. Per engine and version: hold it at the proxies
(`fence`: they cut its streams and stop routing to it), pause (`keep`), vLLM's start/update/finish through
the transfer engine, drop the prefix cache (its KV was computed by the old weights), label the version,
release it at the proxies with the new version, resume. Every token the proxies read from the engine before
the hold is of the old weights, every one after the release of the new ones (`weights.fence` says why);
agents see only a pause.

The backend is whatever vLLM's trainer factory knows: `gloo` (this package, CPU) or `nccl` (GPU engines
started with `--weight-transfer-config '{"backend": "nccl"}'`); `init_info` builds the trainer-side info.

The engine's HTTP client is passed in (`connect`, an `EngineLink`: `engine_client.transfer_client` in a
trainer, a stand-in in a test).
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import time
from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Protocol

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

from seamlessflow.core.control import PauseMode
from seamlessflow.ports import free_port
from seamlessflow.weights.fence import NoFence, VersionFence
from seamlessflow.weights.gloo import DEFAULT_BUCKET_BYTES, DEFAULT_TIMEOUT_S, GlooTrainerInitInfo
from seamlessflow.weights.plugin import register

log = logging.getLogger(__name__)


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
                   timeout_s: float = DEFAULT_TIMEOUT_S) -> Callable[[], TrainerInitInfo]:
    """A fresh rendezvous (new port) per engine on `host`, the address the engines reach the trainer at."""
    return lambda: GlooTrainerInitInfo(host, free_port(), 2, bucket_bytes=bucket_bytes, timeout_s=timeout_s, rank=0)


def nccl_init_info(host: str, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> Callable[[], TrainerInitInfo]:
    """vLLM's own NCCL backend (GPU trainer and engines), packed in buckets of `bucket_bytes`. Configured,
    not run here: no GPU with vLLM was available to this project's tests."""
    from vllm.distributed.weight_transfer.nccl_engine import NCCLTrainerInitInfo

    return lambda: NCCLTrainerInitInfo(host, free_port(), 2, packed=True, packed_buffer_size_bytes=bucket_bytes,
                                       rank=0)


def init_info_for(backend: str, host: str, bucket_bytes: int = DEFAULT_BUCKET_BYTES) -> Callable[[], TrainerInitInfo]:
    if backend == "nccl":
        return nccl_init_info(host, bucket_bytes)
    if backend == "gloo":
        return gloo_init_info(host, bucket_bytes)
    raise ValueError(f"no trainer-side setup for weight-transfer backend {backend!r} (gloo or nccl)")


@dataclass
class Delivery:
    """One version's outcome: which engines have it (and in how many seconds each), which failed and why."""

    version: int
    seconds: dict[str, float] = field(default_factory=dict)
    failed: dict[str, str] = field(default_factory=dict)


class PolicyBroadcaster:
    """Engines join once (`join`), then every `send` delivers a version to all of them concurrently.
    `connect(url)` opens an engine's HTTP client (`seamlessflow.weights.engine_client.transfer_client`), whose calls
    must wait as long as a whole version takes to arrive."""

    def __init__(self, module: torch.nn.Module | None, init_info: Callable[[], TrainerInitInfo],
                 connect: Callable[[str], EngineLink],
                 on_failed: Callable[[str, str], None] = lambda url, reason: None,
                 source_for: Callable[[str], WeightSource] | None = None, fence: VersionFence | None = None):
        register()
        self.init_info, self.connect, self.on_failed = init_info, connect, on_failed
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
        try:
            engine = WeightTransferTrainerFactory.trainer_init(self.init_info(), client=client,
                                                               source=self.source_for(url))
        except Exception as exc:  # any failure to form the group means: this engine takes files
            client.close()
            log.warning("engine %s cannot join the transfer group: %s", url, exc)
            return str(exc) or type(exc).__name__
        self.links[url] = (client, engine)
        return None

    def leave(self, url: str) -> None:
        client, engine = self.links.pop(url, (None, None))
        if engine is not None:
            engine.shutdown()
        if client is not None:
            client.close()

    def send(self, version: int, only: Collection[str] | None = None) -> Delivery:
        """Deliver `version` to every joined engine (or those of `only`, URLs: a catch-up); a failed engine
        is dropped and reported."""
        delivery = Delivery(version)
        links = {url: link for url, link in self.links.items() if only is None or url in only}
        if not links:
            return delivery
        with cf.ThreadPoolExecutor(max_workers=len(links)) as pool:
            futures = {pool.submit(self._deliver, url, client, engine, version): url
                       for url, (client, engine) in links.items()}
            for future in cf.as_completed(futures):
                url = futures[future]
                try:
                    delivery.seconds[url] = future.result()
                except Exception as exc:
                    delivery.failed[url] = str(exc) or type(exc).__name__
        for url, reason in delivery.failed.items():
            log.error("engine %s failed to take version %d: %s", url, version, reason)
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

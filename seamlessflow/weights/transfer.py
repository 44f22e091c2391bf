"""The publishing rank's live weight transfer: each new version into every engine that serves the policy.

Engines are found where the system already announces them: rollout workers' heartbeats on the status
topic carry their engine URL, engine pid, version and whether the engine was started with a transfer
backend (figure `weight_transfer`). Each turn of the trainer loop folds the new heartbeats (`poll`); an
engine seen for the first time, or restarted (another pid), joins a transfer group of its own and, when it
is behind, gets the current version at once (`catch_up`): that is how a worker that starts, restarts after
a crash or comes back from `train` is brought up to date before it reports itself serving again.

`deliver` sends version N to every joined engine (`seamlessflow.weights.broadcast` does hold at the
proxies, pause(keep), transfer, prefix-cache reset, label, release at the proxies, resume per engine; the
proxies' fence URLs come from their heartbeats on the same topic, `weights.fence`). An engine that fails
is taken out of routing the way the scheduler does it for a silent resource (a `failed` ResourceStatus on its
key) and catches up when it comes back. `deliver` returns only when `core.delivery.may_announce` holds, so
the loop announces WeightVersion N after delivery, never before.

The weights sent are the version's host snapshot (the one the file writer gets), kept until the next
version, so a late joiner gets exactly version N even after further optimizer steps. With the NCCL backend
they stream from the trainer's device memory instead (`weights.device_source`), and a host snapshot exists
only for versions with files: such a source is the live weights, valid only while `deliver` runs, so an
engine that joins between two versions without a snapshot waits for the next version (or takes files).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterator

import torch
from vllm.distributed.weight_transfer.base import ParamMeta, WeightSource

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.delivery import EngineSeen, awaited, behind, stale, to_join
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.records import resource_status
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import ResourceStatus, now_ms
from seamlessflow.topics import Topics
from seamlessflow.weights.broadcast import (
    DEFAULT_SEND_TIMEOUT_S,
    EngineLink,
    PolicyBroadcaster,
    SnapshotSource,
    init_info_for,
)
from seamlessflow.weights.fence import ProxyFence, proxy_fence_url

log = logging.getLogger(__name__)

REJOIN_AFTER_S = 30.0  # an engine that could not join is tried again after this long (files feed it meanwhile)


def engine_seen(status: ResourceStatus) -> EngineSeen | None:
    """A rollout engine's heartbeat as the delivery rule sees it (None: not an engine)."""
    if status.kind != ResourceKind.ROLLOUT or not status.engine_url:
        return None
    figures, rollout = status.figures, status.active_tag == Tag.ROLLOUT
    up = rollout and figures.get("engine_up", 0.0) >= 1 and status.state not in (ResourceState.FAILED,
                                                                                 ResourceState.STOPPED)
    return EngineSeen(status.resource_id, status.engine_url, status.weight_version, up,
                      up and status.state == ResourceState.ACTIVE, figures.get("weight_transfer", 0.0) >= 1,
                      int(figures.get("engine_pid", 0.0)))


class CurrentVersion(WeightSource):
    """The version being delivered, as the one source object every joined engine keeps: vLLM's trainer engine
    holds the source it was built with at the join, so the version changes inside it, never the object."""

    def __init__(self) -> None:
        self.source: WeightSource = SnapshotSource()

    def metadata(self) -> list[ParamMeta]:
        return self.source.metadata()

    def __iter__(self) -> Iterator[tuple[str, torch.Tensor]]:
        return iter(self.source)


class EngineTransfer:
    """The publishing rank's view of the serving engines and its transfer group with each of them."""

    def __init__(self, settings: Settings, codec: Codec, producer: MessageProducer, backend: str, host: str,
                 bucket_bytes: int, trainer_id: str, connect: Callable[[str], EngineLink],
                 timeout_s: float = DEFAULT_SEND_TIMEOUT_S):
        self.settings, self.producer, self.trainer_id = settings, producer, trainer_id
        self.topics = Topics(settings)
        self.source = CurrentVersion()
        self.lasting = True  # `source` still holds `version` after `deliver` (a host snapshot, not live weights)
        self.proxies: dict[str, str] = {}  # proxy resource id -> its fence URL (from its heartbeat)
        self.fence = ProxyFence(lambda: self.proxies.values())
        self.broadcaster = PolicyBroadcaster(None, init_info_for(backend, host, bucket_bytes, timeout_s), connect,
                                             on_failed=self._route_out, source_for=lambda url: self.source,
                                             fence=self.fence, timeout_s=timeout_s)
        self.engines: dict[str, EngineSeen] = {}  # resource id -> latest heartbeat
        self.statuses: dict[str, ResourceStatus] = {}  # resource id -> that heartbeat as it came
        self.pids: dict[str, int] = {}  # joined URL -> engine pid at the join
        self.holding: dict[str, int] = {}  # joined URL -> version delivered since the join
        self.routed_out: set[str] = set()  # URLs taken out of routing during the current version
        self.refused: dict[tuple[str, int], float] = {}  # (URL, pid) -> when it could not join (files feed it)
        self.delivered_ms: dict[int, int] = {}  # version -> when `deliver` finished (wall clock, ms)
        self.version = 0  # the version in `source`
        self.update_s = 0.0  # wall seconds of the last version into every engine (heartbeat figure)
        self._reader = Subscriber(settings, codec, None, name=f"{trainer_id}-engines")
        self._fold(self._reader.catch_up(self.topics.status))

    def poll(self) -> None:
        self._fold(self._reader.messages(0.0))

    def _fold(self, messages: list) -> None:
        for message in messages:
            if isinstance(message, ResourceStatus) and (message.team, message.run) == (self.settings.team,
                                                                                        self.settings.run):
                fence_url = proxy_fence_url(message)
                if fence_url is not None:
                    self.proxies[message.resource_id] = fence_url
                seen = engine_seen(message)
                if seen is not None:
                    self.engines[seen.resource_id], self.statuses[seen.resource_id] = seen, message

    def catch_up(self) -> None:
        """Leave the groups of engines that went down or restarted, join the new ones, and send the current
        version to the joined engines that are behind it."""
        self.poll()
        engines = list(self.engines.values())
        for url in stale(engines, self.pids):
            self._leave(url)
        for engine in to_join(engines, self.pids):
            if time.monotonic() - self.refused.get((engine.url, engine.pid), -math.inf) >= REJOIN_AFTER_S:
                self._join(engine)
        if self.version == 0 or not self.lasting:
            return  # nothing trained yet (the base model), or the version's source was the live weights
        late = {e.url for e in behind(engines, self.version, self.pids) if self.holding.get(e.url, 0) < self.version}
        if late:
            log.info("catching up %s to version %d", sorted(late), self.version)
            self._send(self.version, late)

    def deliver(self, version: int, snapshot: dict[str, torch.Tensor] | WeightSource, lasting: bool = True) -> float:
        """Version `version` (a host snapshot, or a source such as the device's buckets: `lasting` False when
        it does not outlive this call) into every serving engine, or each of them out of routing; returns
        seconds. Every joined engine is behind the new version, so `catch_up` is the send; it runs again for
        an engine that appeared meanwhile, then whoever still lacks the version is routed out."""
        began = time.monotonic()
        self.source.source = SnapshotSource(snapshot) if isinstance(snapshot, dict) else snapshot
        self.version, self.routed_out, self.lasting = version, set(), True
        for _ in range(3):
            self.catch_up()
            if not awaited(version, self.engines.values(), self._holding(version), self.routed_out):
                break
        for engine in awaited(version, self.engines.values(), self._holding(version), self.routed_out):
            self._route_out(engine.url, "did not take the version through its transfer group")
        self.lasting = lasting
        self.update_s, self.delivered_ms[version] = time.monotonic() - began, now_ms()
        log.info("version %d into %d engine(s) in %.2f s", version, len(self._holding(version)), self.update_s)
        return self.update_s

    def _holding(self, version: int) -> set[str]:
        return {url for url, held in self.holding.items() if held >= version}

    def _send(self, version: int, only: set[str] | None) -> None:
        delivery = self.broadcaster.send(version, only)
        for url in delivery.seconds:
            self.holding[url] = version

    def _join(self, engine: EngineSeen) -> None:
        why = self.broadcaster.join(engine.url)
        if why is None:
            self.pids[engine.url], self.holding[engine.url] = engine.pid, engine.version
            log.info("engine %s (%s) joined the transfer group", engine.resource_id, engine.url)
            return
        self.refused[(engine.url, engine.pid)] = time.monotonic()
        if engine.serving and engine.version < self.version:
            self._route_out(engine.url, why)

    def _leave(self, url: str) -> None:
        self.broadcaster.leave(url)
        self.pids.pop(url, None)
        self.holding.pop(url, None)

    def _route_out(self, url: str, reason: str) -> None:
        """The scheduler's verdict for a silent resource, on the engine's own status key: the proxies stop
        routing to it until a fresh heartbeat of the worker (after it caught up) replaces it."""
        self._leave(url)
        self.routed_out.add(url)
        for rid in [e.resource_id for e in self.engines.values() if e.url == url]:
            last = self.statuses[rid]
            status = resource_status(rid, last.kind, ResourceState.FAILED, last.active_tag, self.settings.team,
                                     self.settings.run, capability_tags=last.capability_tags,
                                     weight_version=last.weight_version, figures={"marked_by_trainer": 1.0},
                                     engine_url=url, epoch=last.epoch, hardware_tags=last.hardware_tags)
            self.producer.send(self.topics.status, rid, status)
            log.warning("engine %s (%s) taken out of routing: %s", rid, url, reason)
        self.producer.flush()

    def close(self) -> None:
        for url in list(self.pids):
            self._leave(url)
        self.fence.close()
        self._reader.close()

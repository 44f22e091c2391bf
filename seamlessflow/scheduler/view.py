"""The scheduler's picture of the cluster, folded from status, ack and weight records (no I/O here).

Why a separate view: the Kafka loop only feeds records in; everything that decides *what the policy sees*
lives here and is tested with plain messages.

Truth and expectation. A heartbeat says what a resource does; a command we just issued says what it is
about to do. Until the resource has caught up with our latest epoch (a heartbeat reports that epoch or
follows an ack for it, or it rejected it, or `command_timeout_s` passed) the policy sees the *expected*
resource (core.scheduler.expect) in state SWITCHING, so it never re-issues the same command while the
previous one is in flight. Times are the scheduler's own clock at receipt (no cross-host clock skew).
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field, replace

from seamlessflow.core.control import Outcome
from seamlessflow.core.policies import Command, SetActive
from seamlessflow.core.resources import EpochBook, Resource, ResourceKind, ResourceState
from seamlessflow.core.scheduler import expect
from seamlessflow.messages import CommandAck, ResourceStatus, WeightVersion
from seamlessflow.scheduler.manager import BASE


def state_of(status: ResourceStatus) -> ResourceState:
    """`stopped` counts as failed: the resource is out of the pool (until it heartbeats again)."""
    return ResourceState.FAILED if status.state is ResourceState.STOPPED else status.state


@dataclass
class Tracked:
    reported: Resource
    kind: ResourceKind
    status: ResourceStatus
    reported_epoch: int = 0
    expected: Resource | None = None
    issued_at: float = -math.inf
    released_epoch: int = 0  # commands up to here no longer block (rejected or timed out)


@dataclass
class ClusterView:
    resource_kinds: frozenset[ResourceKind]
    command_timeout_s: float = 30.0
    rate_window_s: float = 30.0
    epochs: EpochBook = field(default_factory=EpochBook)
    tracked: dict[str, Tracked] = field(default_factory=dict)
    weights: dict[int, str] = field(default_factory=dict)  # version -> uri
    current_version: int = 0  # the base's newest version (what `load_weights` commands carry)
    adapter_versions: dict[str, int] = field(default_factory=dict)  # a team's LoRA adapter -> its newest version
    batch_trajectories: int = 0  # trajectories per step: what each adapter version took out of its backlog
    policy_of: dict[str, str] = field(default_factory=dict)  # team -> the adapter trained on its rollouts
    trainer_of: dict[str, str] = field(default_factory=dict)  # an adapter trainer's resource id -> its adapter
    backlog: dict[str, int] = field(default_factory=dict)  # policy (BASE or an adapter) -> trajectories waiting
    arrivals: deque[float] = field(default_factory=deque)
    last_ack: dict[str, CommandAck] = field(default_factory=dict)
    proxies: dict[str, tuple[int, float]] = field(default_factory=dict)  # live proxy -> (version, heartbeat)
    paused_proxies: dict[str, int] = field(default_factory=dict)  # proxy whose last heartbeat said paused -> its epoch
    proxy_figures: dict[str, dict[str, float]] = field(default_factory=dict)  # live proxy -> its last figures

    def on_status(self, status: ResourceStatus, now: float) -> None:
        if status.kind is ResourceKind.PROXY:
            self._on_proxy(status, now)
        if status.kind not in self.resource_kinds:
            return
        old = self.tracked.get(status.resource_id)
        last_switch = old.reported.last_switch if old else -math.inf
        if old and old.reported.active != status.active_tag:
            last_switch = now
        resource = Resource(
            id=status.resource_id, tags=frozenset(status.capability_tags), active=status.active_tag,
            state=state_of(status), weight_version=status.weight_version,
            throughput=float(status.figures.get("tokens_per_s", 0.0)),
            memory_gb=float(status.figures.get("memory_gb", 0.0)), last_heartbeat=now, last_switch=last_switch,
            hardware_tags=frozenset(status.hardware_tags),
        )
        tracked = old or Tracked(resource, status.kind, status)
        tracked.reported, tracked.kind, tracked.status = resource, status.kind, status
        # an ack counts once a heartbeat sent after it arrives (same partition, so in order): only then
        # does the heartbeat describe the resource with the command applied
        tracked.reported_epoch = max(tracked.reported_epoch, status.epoch, self.epochs.acked.get(status.resource_id, 0))
        if status.epoch > self.epochs.issued.get(status.resource_id, 0):  # it applied epochs we never saw
            self.epochs.issued[status.resource_id] = status.epoch
        self.tracked[status.resource_id] = tracked
        if status.resource_id in self.trainer_of:
            self._true_up_backlog(self.trainer_of[status.resource_id], status.figures)

    def _true_up_backlog(self, adapter: str, figures: dict[str, float]) -> None:
        """An adapter trainer that has read every record so far (`read_up`) holds its whole backlog: the samples it
        has not trained yet (`pending_samples`). The estimate only adds arrivals and takes a batch per version, so
        it runs above that whenever the trainer finishes trajectories untrained that the manager counts as usable
        (groups of a task it already found too easy); brought down to the trainer's count, it cannot drift."""
        if figures.get("read_up") == 1.0 and "pending_samples" in figures:
            self.backlog[adapter] = min(self.backlog.get(adapter, 0), int(figures["pending_samples"]))

    def _on_proxy(self, status: ResourceStatus, now: float) -> None:
        if status.epoch > self.epochs.issued.get(status.resource_id, 0):
            self.epochs.issued[status.resource_id] = status.epoch
        if state_of(status) is ResourceState.FAILED:
            self.proxies.pop(status.resource_id, None)
            self.proxy_figures.pop(status.resource_id, None)
        else:
            self.proxies[status.resource_id] = (status.weight_version, now)
            self.proxy_figures[status.resource_id] = dict(status.figures)
        if state_of(status) is ResourceState.PAUSED:
            self.paused_proxies[status.resource_id] = status.epoch
        else:
            self.paused_proxies.pop(status.resource_id, None)

    def live(self, now: float, timeout_s: float) -> list[Tracked]:
        """Resources heard from within `timeout_s` and not marked failed."""
        return [t for t in self.tracked.values()
                if t.reported.state is not ResourceState.FAILED and now - t.reported.last_heartbeat <= timeout_s]

    def live_proxies(self, now: float, timeout_s: float) -> dict[str, int]:
        """Proxies heard from within `timeout_s`, with the version each labels now."""
        return {rid: version for rid, (version, seen) in self.proxies.items() if now - seen <= timeout_s}

    def stranded_proxies(self) -> frozenset[str]:
        """Proxies whose latest heartbeat says paused, by the newest command ever issued to them (its epoch):
        nothing since will resume them. A heartbeat from before a newer command does not count, so a resume
        in flight is not sent again."""
        return frozenset(p for p, epoch in self.paused_proxies.items() if epoch >= self.epochs.issued.get(p, 0))

    def on_ack(self, ack: CommandAck) -> None:
        tracked = self.tracked.get(ack.resource_id)
        self.last_ack[ack.resource_id] = ack
        if ack.outcome is Outcome.OK:
            self.epochs.ack(ack.resource_id, ack.epoch)
        elif tracked is not None and ack.epoch >= self.epochs.issued.get(ack.resource_id, 0):
            tracked.released_epoch = max(tracked.released_epoch, ack.epoch)  # rejected/failed: trust heartbeats

    def on_weights(self, version: WeightVersion) -> None:
        if version.adapter:  # a team's adapter: its engines' workers load it themselves, never as base weights
            if version.version > self.adapter_versions.get(version.adapter, 0):
                self.adapter_versions[version.adapter] = version.version
                # the adapter's step took one batch of its own team's rollouts; the rest still waits
                self.discount(self.batch_trajectories, version.adapter)
            return
        self.weights[version.version] = version.uri
        if version.version > self.current_version:
            self.current_version = version.version
            self.backlog[BASE] = 0

    @property
    def trajectories_since_version(self) -> int:
        """The backlog's estimate (trainers report none): the fullest policy's, as a batch is ready when one
        policy's trainer has its batch."""
        return max(self.backlog.values(), default=0)

    def discount(self, trajectories: int, policy: str = BASE) -> None:
        """Trajectories the policy's trainer will not train (no-signal groups, a batch it took) leave its backlog."""
        self.backlog[policy] = max(0, self.backlog.get(policy, 0) - trajectories)

    def on_trajectory(self, now: float, team: str = "") -> None:
        policy = self.policy_of.get(team, BASE)
        self.backlog[policy] = self.backlog.get(policy, 0) + 1
        self.arrivals.append(now)

    def on_issued(self, command: Command, now: float) -> None:
        """Remember what a just-published command should do to its resource."""
        tracked = self.tracked[command.resource_id]
        base = tracked.expected if self.pending(command.resource_id, now) and tracked.expected else tracked.reported
        tracked.expected = expect(base, command, now)
        tracked.issued_at = now
        if isinstance(command, SetActive):
            tracked.reported = replace(tracked.reported, last_switch=now)

    def mark_failed(self, resource_id: str) -> None:
        tracked = self.tracked[resource_id]
        tracked.reported = replace(tracked.reported, state=ResourceState.FAILED)
        tracked.expected = None

    def pending(self, resource_id: str, now: float) -> bool:
        """A command is in flight: issued, not yet reflected, acked, rejected, or timed out."""
        tracked = self.tracked[resource_id]
        issued = self.epochs.issued.get(resource_id, 0)
        caught_up = max(tracked.reported_epoch, tracked.released_epoch)
        return issued > caught_up and now - tracked.issued_at < self.command_timeout_s

    def resources(self, now: float) -> list[Resource]:
        """What the policy sees: heartbeat truth, or the expected resource (SWITCHING) while pending."""
        out = []
        for rid, tracked in sorted(self.tracked.items()):
            if tracked.expected is not None and self.pending(rid, now):
                out.append(replace(tracked.expected, state=ResourceState.SWITCHING,
                                   last_heartbeat=tracked.reported.last_heartbeat))
            else:
                tracked.expected = None
                out.append(tracked.reported)
        return out

    def trajectory_rate(self, now: float) -> float:
        while self.arrivals and now - self.arrivals[0] > self.rate_window_s:
            self.arrivals.popleft()
        return len(self.arrivals) / self.rate_window_s

    def trainer_figure(self, name: str) -> float | None:
        """A figure from the live trainers' heartbeats (summed), or None when no trainer reports it."""
        values = [
            t.status.figures[name]
            for t in self.tracked.values()
            if t.kind == ResourceKind.TRAINER
            and t.reported.state is not ResourceState.FAILED
            and name in t.status.figures
        ]
        return sum(values) if values else None

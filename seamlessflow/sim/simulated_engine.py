"""One simulated resource: a continuous-batching decode engine that can also be given the train role.

Decode is modelled as a fluid: all running sequences advance one token per step, and a step takes
`cost.decode_step_s(running, kv_tokens)`. The engine keeps a *progress* counter (tokens decoded per sequence
since it started) so each sequence's finish is a fixed progress mark and the next completion time is
known without touching every sequence: events cost O(log n), which keeps 512 GPUs fast.

`cost` is the workload's calibrated single-GPU model by default, or a `hardware.Roofline` for a given GPU.
For the KV read each running sequence counts with its average context over its stay (prompt, what it had
generated, and half of what is left), so a step's cost changes only when the running set does.
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass

from seamlessflow.core.resources import Resource, ResourceState, Tag
from seamlessflow.sim.hardware import Roofline
from seamlessflow.sim.workload import Workload

EPS = 1e-6


@dataclass(eq=False)
class Rollout:
    """One trajectory being generated. `remaining` is counted when it is not on an engine."""

    id: int
    prompt: int
    length: int
    remaining: float
    version: int = -1  # weights that generated its first token (the oldest, for staleness)
    finish_mark: float = 0.0
    start_mark: float = 0.0
    profile: str | None = None  # routing profile its task declares (prefill | decode)
    kv_mean: float = 0.0  # context counted for the KV read while on an engine
    kv_reserved: float = 0.0  # KV-cache tokens reserved on its engine

    @property
    def session_id(self) -> str:
        return f"r{self.id}"

    @property
    def fresh(self) -> bool:
        return self.remaining >= self.length

    @property
    def generated(self) -> int:
        return self.length - int(math.ceil(self.remaining - EPS))


class SimEngine:
    def __init__(self, resource_id: str, tags: frozenset[str], workload: Workload,
                 cost: Workload | Roofline | None = None, hardware_tags: frozenset[str] = frozenset()):
        self.id, self.tags, self.workload = resource_id, tags, workload
        self.cost = cost or workload  # prefill_s, decode_step_s, max_running, kv_capacity_tokens
        self.hardware_tags = hardware_tags
        self.kv_tokens = 0.0
        self.kv_reserved = 0.0
        self.role: str = Tag.IDLE
        self.state = ResourceState.ACTIVE
        self.version = 0
        self.last_switch = -math.inf
        self.failed_at: float | None = None
        self.running: dict[int, Rollout] = {}
        self._marks: list[tuple[float, int]] = []
        self.progress = 0.0
        self.last_t = 0.0
        self.stall_until = 0.0
        self.op_until: float | None = None
        self.pending_role: str | None = None
        self.pending_version: int | None = None
        self.paused = False
        self.training = False
        self.draining = False  # removed by the autoscaler (`sim.elastic`): finishes what it runs, takes nothing new
        self.token = 0  # bumped on every change; events carry it so stale ones are skipped

    # views

    def resource(self, now: float) -> Resource:
        heartbeat = self.failed_at if self.failed_at is not None else now
        return Resource(id=self.id, tags=self.tags, active=self.pending_role or self.role, state=self.state,
                        weight_version=self.version, last_heartbeat=heartbeat, last_switch=self.last_switch,
                        hardware_tags=self.hardware_tags)

    @property
    def alive(self) -> bool:
        return self.failed_at is None

    @property
    def generating(self) -> bool:
        return self.alive and self.role == Tag.ROLLOUT and self.op_until is None and not self.paused

    @property
    def free_slots(self) -> int:
        return self.cost.max_running - len(self.running) if self.generating and not self.draining else 0

    def fits(self, rollout: Rollout) -> bool:
        """Its whole context fits in the KV cache left (an empty engine takes anything)."""
        return not self.running or self.kv_reserved + rollout.prompt + rollout.length <= self.cost.kv_capacity_tokens

    def _step_s(self) -> float:
        return self.cost.decode_step_s(len(self.running), self.kv_tokens)

    def kind(self) -> str:
        """What the timeline shows for this engine now: its account (`core.accounting`), as the live loop's."""
        if not self.alive:
            return "failed"
        if self.op_until is not None:
            return "switch" if self.pending_role is not None else "sync"
        if self.training:
            return "train"
        if self.generating:
            return "rollout" if self.running else "wait-load"
        if self.paused:
            return "sync"  # paused around a weight load
        return "wait-data" if self.role == Tag.TRAIN else "held"  # lent to a trainer with no batch; the idle role

    # decode

    def advance(self, t: float) -> None:
        if self.generating and self.running:
            start = max(self.last_t, self.stall_until)
            if t > start:
                self.progress += (t - start) / self._step_s()
        self.last_t = max(self.last_t, t)

    def next_completion(self) -> float | None:
        if not (self.generating and self._marks):
            return None
        start = max(self.last_t, self.stall_until)
        return start + max(0.0, self._marks[0][0] - self.progress) * self._step_s()

    def admit(self, rollout: Rollout, t: float) -> None:
        """Start (or resume) a rollout: prefill its prompt and whatever it had generated, then decode."""
        self.advance(t)
        if rollout.fresh:
            rollout.version = self.version
        rollout.start_mark = self.progress
        rollout.finish_mark = self.progress + rollout.remaining
        rollout.kv_mean = rollout.prompt + rollout.generated + rollout.remaining / 2
        rollout.kv_reserved = rollout.prompt + rollout.length
        self.kv_tokens += rollout.kv_mean
        self.kv_reserved += rollout.kv_reserved
        self.running[rollout.id] = rollout
        heapq.heappush(self._marks, (rollout.finish_mark, rollout.id))
        self.stall_until = max(self.stall_until, t) + self.cost.prefill_s(rollout.prompt + rollout.generated)
        self.token += 1

    def load_version(self, version: int) -> None:
        """New weights: rollouts that have not produced a token yet will be generated by them."""
        self.version = version
        for rollout in self.running.values():
            if rollout.fresh and self.progress - rollout.start_mark < 1.0:
                rollout.version = version

    def pop_finished(self, t: float) -> list[Rollout]:
        self.advance(t)
        done: list[Rollout] = []
        while self._marks and self._marks[0][0] <= self.progress + EPS:
            _, rid = heapq.heappop(self._marks)
            rollout = self.running.pop(rid)
            rollout.remaining = 0.0
            self._release(rollout)
            done.append(rollout)
        self.token += 1
        return done

    def evict(self, t: float) -> list[Rollout]:
        """Take every running rollout off the engine, keeping what it generated (partial rollout)."""
        self.advance(t)
        evicted = list(self.running.values())
        for rollout in evicted:
            rollout.remaining = max(EPS, rollout.finish_mark - self.progress)
        self.running.clear()
        self._marks.clear()
        self.kv_tokens = self.kv_reserved = 0.0
        self.token += 1
        return evicted

    def _release(self, rollout: Rollout) -> None:
        self.kv_tokens = max(0.0, self.kv_tokens - rollout.kv_mean) if self.running else 0.0
        self.kv_reserved = max(0.0, self.kv_reserved - rollout.kv_reserved) if self.running else 0.0

"""The simulator with elastic capacity: tasks arriving over time, and rollout engines added and drained by the
autoscaling policy (`core.autoscale`), so its cost (GPU-hours) and the bubble can be set beside a fixed cluster.

What is modelled, and how:

- Tasks arrive by `workload.Arrivals`; the rollout manager submits only tasks that have arrived (still within
  the staleness capacity), so a lull leaves engines idle as it would in a real run.
- The elastic pool is the rollout-only engines; the engines tagged {rollout, train} (the trainer's) stay, as a
  trainer gang does not grow by one GPU. A fixed run (`limits=None`) keeps every engine for the whole run.
- Every `tick_s` the policy reads the signals the stack has (sessions waiting, KV use per engine, trajectories
  waiting for the trainer, the trainer's idle share, engines starting) and its decision is carried out.
- An added engine is billed from the moment it is asked for and serves after `startup_s` (the model load),
  with the newest weights; its start shows on the timeline as kind `start`.
- A removed engine drains: engines still starting are cancelled first, then the least-loaded serving ones
  take no new rollouts and stop once their in-flight ones finish; after `drain_timeout_s` what is left moves
  to other engines with its tokens kept, as partial rollout does across weight updates.

GPU-hours count every engine's life (train-capable ones for the whole run); the bubble is the share of those
engine-seconds that were not rollout or training, so an engine that is not there costs nothing and idles
nothing. For a fixed run both equal what `SimResult` reports.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field, replace

from seamlessflow.core.accounting import OVERHEAD_KINDS, WAITING_KINDS
from seamlessflow.core.autoscale import Autoscaler, CapacitySignals, ScaleDecision, ScalingLimits
from seamlessflow.core.resources import Tag
from seamlessflow.core.timeline import BUSY_KINDS, Interval, time_by_kind
from seamlessflow.sim.commanding import engine_protocol
from seamlessflow.sim.result import SimResult
from seamlessflow.sim.simulated_engine import Rollout, SimEngine
from seamlessflow.sim.simulator import Simulator
from seamlessflow.sim.workload import Arrivals

TRAINER_WINDOW_S = 120.0  # the trainer's idle share is read over this window
ROLLOUT_ONLY = frozenset({Tag.ROLLOUT})


@dataclass(frozen=True)
class ElasticResult:
    """A run's figures (`SimResult`, its bubble over the engines' lives) with what the capacity cost."""

    sim: SimResult
    gpu_hours: float
    engines_peak: int
    engines_mean: float  # GPUs held on average over the run
    slots_used: float  # rollout slots in use over the slots of engines serving rollouts, averaged over ticks
    decisions: tuple[ScaleDecision, ...] = field(repr=False, default=())

    def summary(self) -> dict[str, float | int | str]:
        return {**self.sim.summary(), "gpu_hours": round(self.gpu_hours, 3), "engines_peak": self.engines_peak,
                "engines_mean": round(self.engines_mean, 2), "slots_used": round(self.slots_used, 4),
                "scale_changes": len(self.decisions)}


class ElasticSimulator(Simulator):
    """`Simulator` on an arrival schedule, with the rollout-only engines scaled by `limits` (None: fixed)."""

    def __init__(self, policy: str = "multiplexed", arrivals: Arrivals | None = None,
                 limits: ScalingLimits | None = None, startup_s: float = 60.0, drain_timeout_s: float = 120.0,
                 **options: object):
        super().__init__(policy, **options)  # type: ignore[arg-type]
        self.arrivals = arrivals or Arrivals(((1.0, 1e9),))
        self.startup_s, self.drain_timeout_s = startup_s, drain_timeout_s
        self.autoscaler = Autoscaler(limits) if limits else None
        self.lives: dict[str, list[float]] = {e.id: [0.0, -1.0] for e in self.engines}  # [from, to]; -1: alive
        self.starting: dict[str, SimEngine] = {}
        self.drain_until: dict[str, float] = {}
        self.decisions: list[ScaleDecision] = []
        self.steps_run: deque[list[float]] = deque()  # [start, end] of training steps in the window
        self._next_index = len(self.engines)
        self._scale_due = False
        self._slot_samples: list[float] = []
        if limits:  # start the elastic pool at its floor: a burst finds the cluster small
            for engine in self._elastic()[limits.min_engines:]:
                self.engines.remove(engine)
                self._touched.discard(engine)
                del self.lives[engine.id]
        self._peak = len(self.engines)
        self._capacity_changed()

    # arrivals

    def run(self) -> SimResult:
        self._push(0.0, "arrive", None)
        return super().run()

    def _on_arrive(self, _: object) -> None:
        self._push(self.now + 1.0, "arrive", None)

    def _submit(self) -> None:
        allowed = min(self.ledger.capacity(self.version), self.arrivals.arrived(self.now) - self.ledger.submitted)
        for _ in range(max(0, allowed)):
            prompt, length, profile = self._next_task()
            self.queue.append(Rollout(next(self._ids), prompt, length, float(length), profile=profile))
            self.ledger.on_submitted()

    # the policy

    def _on_tick(self, payload: object) -> None:
        super()._on_tick(payload)
        self._scale_due = self.autoscaler is not None
        serving = [e for e in self.engines if e.role == Tag.ROLLOUT and e.alive]
        if serving:
            self._slot_samples.append(sum(map(len, (e.running for e in serving))) /
                                      sum(e.cost.max_running for e in serving))

    def _autoscale(self) -> None:
        """Read the signals once the moment has settled (arrivals submitted, queues dispatched), then act."""
        self._scale_due = False
        assert self.autoscaler is not None
        pool = [e for e in self._elastic() if not e.draining]
        decision = self.autoscaler.step(self._signals(pool), len(pool) + len(self.starting), self.now)
        if decision.change:
            self.decisions.append(decision)
            for _ in range(decision.change):
                self._add_engine()
            for _ in range(-decision.change):
                self._remove_engine(pool)
            self._capacity_changed()

    def _signals(self, pool: list[SimEngine]) -> CapacitySignals:
        """Sessions waiting: arrived and not yet let in by the rollout manager, or let in and taken by no engine
        (a live stack's calls waiting at the proxies); per-engine figures for the elastic pool only."""
        lines = getattr(self.dispatch, "lines", {})
        return CapacitySignals(
            waiting_sessions=self.arrivals.arrived(self.now) - self.ledger.submitted + len(self.queue),
            queue_depth=tuple(len(lines.get(e.id, ())) for e in pool),
            kv_use=tuple(_kv_use(e) for e in pool),
            trajectories_waiting=len(self.buffer), batch_threshold=self.batch_size,
            trainer_idle=self._trainer_idle(), engines_starting=len(self.starting),
        )

    def _trainer_idle(self) -> float:
        start = max(0.0, self.now - TRAINER_WINDOW_S)
        while self.steps_run and 0 <= self.steps_run[0][1] < start:
            self.steps_run.popleft()
        busy = sum((self.now if end < 0 else end) - max(begin, start) for begin, end in self.steps_run)
        return max(0.0, 1.0 - busy / max(1.0, self.now - start))

    def _maybe_train(self) -> None:
        token = self.trainer.token
        super()._maybe_train()
        if self.trainer.token != token:
            self.steps_run.append([self.now, -1.0])

    def _on_train_done(self, token: int) -> None:
        if token == self.trainer.token and self.steps_run:
            self.steps_run[-1][1] = self.now
        super()._on_train_done(token)

    # engines coming and going

    def _elastic(self) -> list[SimEngine]:
        return [e for e in self.engines if e.tags == ROLLOUT_ONLY]

    def _add_engine(self) -> None:
        engine = SimEngine(f"gpu{self._next_index:03d}", ROLLOUT_ONLY, self.workload)
        self._next_index += 1
        self.starting[engine.id] = engine
        self.lives[engine.id] = [self.now, -1.0]
        self._peak = max(self._peak, len(self.engines) + len(self.starting))
        self._push(self.now + self.startup_s, "ready", engine)

    def _on_ready(self, engine: SimEngine) -> None:
        if self.starting.pop(engine.id, None) is None:
            return  # cancelled while it loaded
        self.intervals.append(Interval(engine.id, self.lives[engine.id][0], self.now, "sync"))
        engine.role, engine.last_t = Tag.ROLLOUT, self.now
        engine.load_version(self.version)  # a new engine loads the newest weights as it starts
        self.engines.append(engine)
        self.by_id[engine.id] = engine
        self.protocols[engine.id] = engine_protocol(engine.id, engine.tags, engine.role)
        self._op_tokens[engine.id] = 0
        self._touched.add(engine)
        self._capacity_changed()
        self._dirty = True

    def _remove_engine(self, pool: list[SimEngine]) -> None:
        """Cancel the newest engine still starting, else drain the least-loaded serving one."""
        if self.starting:
            engine_id = next(reversed(self.starting))
            del self.starting[engine_id]
            self.intervals.append(Interval(engine_id, self.lives[engine_id][0], self.now, "sync"))
            self.lives[engine_id][1] = self.now
            return
        self._drain(min((e for e in pool if not e.draining), key=lambda e: (len(e.running), e.id)))

    def _drain(self, engine: SimEngine) -> None:
        """No new rollouts from now; it stops at the next settle with nothing running, or at its deadline."""
        engine.draining = True
        self.drain_until[engine.id] = self.now + self.drain_timeout_s

    def _settle(self) -> None:
        for engine_id, deadline in list(self.drain_until.items()):
            engine = self.by_id[engine_id]
            if not engine.running or self.now >= deadline:
                self._stop(engine)
        super()._settle()
        if self._scale_due:
            self._autoscale()

    def _stop(self, engine: SimEngine) -> None:
        """A drained engine stops; rollouts past the deadline move on with their tokens (partial rollout)."""
        self.queue.extendleft(reversed(engine.evict(self.now)))
        del self.drain_until[engine.id]
        self.engines.remove(engine)
        self._touched.discard(engine)
        self._mark(engine, None)
        self._op_tokens[engine.id] += 1  # an operation in progress ends with the engine
        self.lives[engine.id][1] = self.now
        self._capacity_changed()
        self._dirty = True

    def _capacity_changed(self) -> None:
        """The rollout manager may keep as many rollouts in flight as the engines taking work can run."""
        self.ledger.max_concurrent = sum(e.cost.max_running for e in self.engines if not e.draining)

    # figures

    def elastic_result(self) -> ElasticResult:
        """Run, and report the figures with the bubble taken over the engines' lives."""
        result = self.run()
        held = sum((self.now if to < 0 else to) - since for since, to in self.lives.values())
        by_kind = time_by_kind(self.intervals)
        busy = sum(by_kind.get(kind, 0.0) for kind in BUSY_KINDS)
        overhead = sum(by_kind.get(kind, 0.0) for kind in OVERHEAD_KINDS)  # an engine starting loads weights
        sim = replace(result, bubble_ratio=max(0.0, 1.0 - busy / held) if held else 0.0,
                      idle_ratio=sum(by_kind.get(kind, 0.0) for kind in WAITING_KINDS) / held if held else 0.0,
                      overhead_ratio=overhead / held if held else 0.0)
        slots = sum(self._slot_samples) / len(self._slot_samples) if self._slot_samples else 0.0
        return ElasticResult(sim, held / 3600.0, self._peak, held / self.now if self.now else 0.0, slots,
                             tuple(self.decisions))


def _kv_use(engine: SimEngine) -> float:
    """Share of the engine's KV cache in use; the calibrated model caps sequences by count, so slots stand in."""
    capacity = engine.cost.kv_capacity_tokens
    if capacity == float("inf"):
        return len(engine.running) / engine.cost.max_running
    return min(1.0, engine.kv_reserved / capacity)


def simulate_elastic(policy: str = "multiplexed", arrivals: Arrivals | None = None,
                     limits: ScalingLimits | None = None, **options: object) -> ElasticResult:
    """One run on `arrivals`: autoscaled by `limits`, or every engine for the whole run when None."""
    return ElasticSimulator(policy, arrivals=arrivals, limits=limits, **options).elastic_result()  # type: ignore[arg-type]

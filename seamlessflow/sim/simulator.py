"""Discrete-event cluster simulator that drives the real scheduler policies.

The loop mirrors the real system: a rollout manager submits rollouts within the staleness capacity
(`core.staleness.RolloutLedger`), engines generate them, finished trajectories fill a buffer, a trainer
takes a batch whenever the resources with the `train` role are ready, and the *same*
`core.scheduler.Scheduler` (with the simulator's clock injected) turns resources and pipeline state into
commands, which the simulator executes with their costs: a role switch takes `switch_s`, a weight load
`sync_s`, and a rollout preempted off an engine keeps its tokens and is re-prefilled elsewhere (partial
rollout).

The scheduler is consulted whenever something other than a single completion happens (a switch or load
finishes, a step starts or ends, a batch becomes ready, a resource dies) and on a 5 s timer, the same
triggers the scheduler service reacts to.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass, field

import numpy as np

from seamlessflow.core.policies import LoadWeights, Pause, PipelineState, Resume, SchedulerConfig, SetActive, get_policy
from seamlessflow.core.resources import ResourceState, Tag
from seamlessflow.core.scheduler import Scheduler
from seamlessflow.core.staleness import RolloutLedger
from seamlessflow.core.timeline import Interval
from seamlessflow.scheduler.options import SchedulerOptions
from seamlessflow.sim.cluster import Pool, build_engines
from seamlessflow.sim.commanding import admitted, carried_out, engine_protocol
from seamlessflow.sim.dispatch import make_dispatch
from seamlessflow.sim.hardware import ModelShape
from seamlessflow.sim.result import SimResult
from seamlessflow.sim.simulated_engine import Rollout, SimEngine
from seamlessflow.sim.workload import Workload

RATE_WINDOW_S = 30.0


class SimulationStalled(RuntimeError):
    """The pipeline stopped making progress (e.g. no resource can train)."""


@dataclass
class _Trainer:
    engines: list[SimEngine] = field(default_factory=list)
    batch: list[Rollout] = field(default_factory=list)
    token: int = 0


class Simulator:
    def __init__(self, policy: str, gpus: int = 64, mix: float = 0.5, steps: int = 8, seed: int = 0,
                 workload: Workload | None = None, config: SchedulerConfig | None = None,
                 failures: dict[str, float] | None = None, tick_s: float = 5.0, max_time_s: float = 1e7,
                 max_staleness: int | None = None, cluster: tuple[Pool, ...] | None = None,
                 routing: str = "least-loaded", model: ModelShape | None = None):
        self.spec = get_policy(policy)
        self.max_staleness = self.spec.max_staleness if max_staleness is None else max_staleness
        self.workload = workload or Workload()
        w = self.workload
        default = SchedulerOptions(switch_cost_s=w.switch_s, min_dwell_s=2 * w.switch_s)
        self.config = config or default.scheduler_config()
        if cluster:  # heterogeneous GPUs priced by their roofline (sim.hardware); tags from the pools
            self.engines = build_engines(cluster, w, model, all_train=self.spec.all_train_capable)
            gpus = len(self.engines)
        self.gpus, self.steps, self.tick_s, self.max_time_s = gpus, steps, tick_s, max_time_s
        self.train_capable = gpus if self.spec.all_train_capable else round(gpus * mix)
        if cluster:
            self.train_capable = sum(1 for e in self.engines if Tag.TRAIN in e.tags)
        else:
            self.engines = [SimEngine(f"gpu{i:03d}", self._tags(i), w) for i in range(gpus)]
        if not 1 <= self.train_capable <= gpus:
            raise ValueError(f"mix {mix} leaves {self.train_capable} of {gpus} GPUs able to train")
        self.routing, self.dispatch = routing, make_dispatch(routing)
        self.by_id = {e.id: e for e in self.engines}
        self.protocols = {e.id: engine_protocol(e.id, e.tags, e.role) for e in self.engines}
        self.now = 0.0
        self.scheduler = Scheduler(policy, clock=lambda: self.now, config=self.config)
        self.batch_size = w.batch_size(gpus)
        self.ledger = RolloutLedger(self.batch_size, self.max_staleness, sum(e.cost.max_running for e in self.engines))
        self.rng = np.random.default_rng(seed)
        self._tasks: list[tuple[int, int, str | None]] = []
        self._ids = itertools.count()
        self._events: list[tuple[float, int, str, object]] = []
        self._order = itertools.count()
        self.queue: deque[Rollout] = deque()
        self.buffer: deque[Rollout] = deque()
        self.completions: deque[float] = deque()
        self.trainer = _Trainer()
        self.version = 0
        self.trained_steps = 0
        self.trained_tokens = 0
        self.staleness: list[int] = []
        self.intervals: list[Interval] = []
        self._open: dict[str, tuple[str, float]] = {}
        self._touched: set[SimEngine] = set(self.engines)
        self._scheduled: dict[str, int] = {}
        self._op_tokens: dict[str, int] = {e.id: 0 for e in self.engines}
        self._resume_pending: set[str] = set()
        self._dirty = True
        for resource_id, at in (failures or {}).items():
            self._push(at, "fail", self.by_id[resource_id])

    def _tags(self, index: int) -> frozenset[str]:
        flexible = index >= self.gpus - self.train_capable
        return frozenset({Tag.ROLLOUT, Tag.TRAIN} if flexible else {Tag.ROLLOUT})

    # main loop

    def run(self) -> SimResult:
        self._push(0.0, "tick", None)
        while self.trained_steps < self.steps:
            if self.now > self.max_time_s or not self._events:
                raise SimulationStalled(f"{self.spec.name}: {self.trained_steps} steps by t={self.now:.0f}s")
            self.now = self._events[0][0]
            while self._events and self._events[0][0] <= self.now:
                _, _, kind, payload = heapq.heappop(self._events)
                getattr(self, f"_on_{kind}")(payload)
            self._settle()
        for engine in self.engines:
            self._mark(engine, None)
        return SimResult.from_run(self)

    def _push(self, at: float, kind: str, payload: object) -> None:
        heapq.heappush(self._events, (at, next(self._order), kind, payload))

    def _settle(self) -> None:
        """Trainer, rollout manager, then the scheduler, which so sees only the backlog no engine took."""
        self._maybe_train()
        self._submit()
        self._dispatch()
        if self._dirty:
            self._consult_scheduler()
            self._maybe_train()
            self._submit()
            self._dispatch()
        for engine in self._touched:
            self._refresh(engine)
        self._touched.clear()

    # events

    def _on_tick(self, _: object) -> None:
        self._dirty = True
        self._push(self.now + self.tick_s, "tick", None)

    def _on_engine(self, payload: tuple[SimEngine, int]) -> None:
        engine, token = payload
        if token != engine.token:
            return
        for rollout in engine.pop_finished(self.now):
            self._finish(rollout)
        self._touched.add(engine)

    def _on_op_done(self, payload: tuple[SimEngine, int]) -> None:
        engine, token = payload
        if token != self._op_tokens[engine.id] or not engine.alive:
            return
        engine.advance(self.now)
        if engine.pending_role is not None:
            engine.role, engine.pending_role = engine.pending_role, None
        if engine.pending_version is not None:
            engine.load_version(engine.pending_version)
            engine.pending_version = None
        engine.op_until = None
        if engine.id in self._resume_pending:
            self._resume_pending.discard(engine.id)
            engine.paused = False
        engine.state = ResourceState.PAUSED if engine.paused else ResourceState.ACTIVE
        engine.token += 1
        self._touched.add(engine)
        self._dirty = True

    def _on_train_done(self, token: int) -> None:
        if token != self.trainer.token:
            return
        self.version += 1
        self.trained_steps += 1
        for engine in self.trainer.engines:
            engine.training = False
            self._touched.add(engine)
        self.trainer = _Trainer(token=self.trainer.token)
        self._dirty = True

    def _on_fail(self, engine: SimEngine) -> None:
        """The engine dies: the proxy re-routes its calls at once; the scheduler notices by heartbeat."""
        self.queue.extendleft(reversed(engine.evict(self.now)))
        engine.failed_at = self.now
        engine.op_until, engine.pending_role, engine.pending_version = None, None, None
        if engine in self.trainer.engines:
            self.buffer.extendleft(reversed(self.trainer.batch))
            for other in self.trainer.engines:
                other.training = False
                self._touched.add(other)
            self.trainer = _Trainer(token=self.trainer.token + 1)
        self._touched.add(engine)
        self._dirty = True

    def _finish(self, rollout: Rollout) -> None:
        self.ledger.on_accepted()
        self.buffer.append(rollout)
        self.completions.append(self.now)
        if len(self.buffer) == self.batch_size:
            self._dirty = True

    # rollout manager and trainer

    def _submit(self) -> None:
        for _ in range(max(0, self.ledger.capacity(self.version))):
            prompt, length, profile = self._next_task()
            self.queue.append(Rollout(next(self._ids), prompt, length, float(length), profile=profile))
            self.ledger.on_submitted()

    def _next_task(self) -> tuple[int, int, str | None]:
        if not self._tasks:
            self._tasks = self.workload.sample(self.rng, 4096)[::-1]
        return self._tasks.pop()

    def _dispatch(self) -> None:
        """Queued rollouts to engines: a shared least-loaded queue, or session routing (`sim.dispatch`)."""
        if self.queue or self.routing != "least-loaded":
            self._touched |= self.dispatch(self.queue, self.engines, self.now)

    def _maybe_train(self) -> None:
        if self.trainer.engines or len(self.buffer) < self.batch_size:
            return
        ready = [e for e in self.engines if e.alive and e.role == Tag.TRAIN and e.op_until is None]
        incoming = any(e.alive and e.pending_role == Tag.TRAIN for e in self.engines)
        if not ready or incoming:
            return
        batch = [self.buffer.popleft() for _ in range(self.batch_size)]
        tokens = sum(r.prompt + r.length for r in batch)
        self.staleness += [self.version - r.version for r in batch]
        self.trained_tokens += tokens
        self.trainer = _Trainer(ready, batch, self.trainer.token + 1)
        for engine in ready:
            engine.training = True
            self._touched.add(engine)
        self._push(self.now + self.workload.train_step_s(tokens, len(ready)), "train_done", self.trainer.token)
        self._dirty = True

    # scheduler

    def _pipeline(self) -> PipelineState:
        while self.completions and self.completions[0] < self.now - RATE_WINDOW_S:
            self.completions.popleft()
        window = min(RATE_WINDOW_S, self.now) or 1.0
        return PipelineState(
            queued_tasks=self._queued(), in_flight=self.ledger.running - self._queued(),
            buffered=len(self.buffer), batch_threshold=self.batch_size, current_version=self.version,
            training=bool(self.trainer.engines), max_staleness=self.max_staleness,
            trajectory_rate=len(self.completions) / window,
        )

    def _queued(self) -> int:
        return len(self.queue) + getattr(self.dispatch, "waiting", 0)

    def _consult_scheduler(self) -> None:
        self._dirty = False
        resources = [e.resource(self.now) for e in self.engines]
        stamped, failed = self.scheduler.step(resources, self._pipeline())
        for resource_id in failed:
            self.by_id[resource_id].state = ResourceState.FAILED
        for item in stamped:
            engine = self.by_id[item.command.resource_id]
            delivered = admitted(self.protocols[engine.id], item) if engine.alive else None
            if delivered is not None:  # a dead engine hears nothing; a stale or refused command changes nothing
                self._execute(engine, item.command)
                carried_out(self.protocols[engine.id], delivered)

    def _execute(self, engine: SimEngine, command: SetActive | Pause | Resume | LoadWeights) -> None:
        engine.advance(self.now)
        engine.token += 1
        self._touched.add(engine)
        if isinstance(command, SetActive):
            if engine.role == Tag.ROLLOUT:
                self.queue.extendleft(reversed(engine.evict(self.now)))
            engine.pending_role, engine.last_switch = command.role, self.now
            engine.state = ResourceState.SWITCHING
            self._start_op(engine, self.workload.switch_s)
        elif isinstance(command, Pause):
            engine.paused, engine.state = True, ResourceState.PAUSED
        elif isinstance(command, LoadWeights):
            engine.pending_version = command.version
            self._start_op(engine, self.workload.sync_s)
        elif engine.op_until is None:
            engine.paused, engine.state = False, ResourceState.ACTIVE
        else:
            self._resume_pending.add(engine.id)

    def _start_op(self, engine: SimEngine, seconds: float) -> None:
        engine.op_until = max(engine.op_until or self.now, self.now) + seconds
        self._op_tokens[engine.id] += 1
        self._push(engine.op_until, "op_done", (engine, self._op_tokens[engine.id]))

    # bookkeeping

    def _refresh(self, engine: SimEngine) -> None:
        self._mark(engine, engine.kind())
        if self._scheduled.get(engine.id) != engine.token:
            at = engine.next_completion()
            if at is not None:
                self._push(at, "engine", (engine, engine.token))
                self._scheduled[engine.id] = engine.token

    def _mark(self, engine: SimEngine, kind: str | None) -> None:
        previous = self._open.get(engine.id)
        if previous is not None and previous[0] == kind:
            return
        if previous is not None and self.now > previous[1]:
            self.intervals.append(Interval(engine.id, previous[1], self.now, previous[0]))
        if kind is None:
            self._open.pop(engine.id, None)
        else:
            self._open[engine.id] = (kind, self.now)

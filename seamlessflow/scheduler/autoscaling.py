"""The autoscaling policy (`core.autoscale`) run live in the scheduler, advisory: each tick, from the heartbeats
the view already holds to a decision, logged when the target changes and published as scheduler figures.

Why advisory: nothing here adds or drains an engine; the process holding the stack does with
`scheduler.autoscale.act` (`stack.scale.AdviceActor`), else an operator with `seamlessflow scale rollout=+N|-N`.
The scheduler says how many engines it would run and why. Because nothing acts,
an advice stands through its cool-down (the policy holds then anyway) and is withdrawn after it when the load
no longer asks for it; acted on, the engines reach the target and the change shown becomes 0.

Signals, where each comes from (a signal nothing reports stays at its neutral value, as noted):

- `waiting_sessions`: the live proxies' `queued` figure (agent calls waiting for an admission slot). Not
  counted, because nothing reports them: tasks no agent has taken yet, and groups the rollout manager holds back.
- `queue_depth`, `kv_use`: per serving engine, its rollout worker's `requests_waiting` and `kv_cache_usage`
  figures (vLLM's /metrics, read with each heartbeat); a worker that could not read them counts 0 and 0.0.
- `engines_starting`: rollout workers in the rollout role whose `engine_up` figure is 0 (model still loading).
- `trajectories_waiting`, `batch_threshold`: the pipeline's `buffered` (the trainer's figure when it reports
  one, else the scheduler's estimate) and the scheduler's batch threshold.
- `trainer_idle`: 1 minus how fast the trainer's `busy_s` (seconds in steps and publishing) grew over
  `trainer_idle_window_s` of this scheduler's clock; 0 (neutral) until a trainer has sent two heartbeats.

The engines counted are the live rollout workers (heard within `heartbeat_timeout_s`, not failed or stopped)
in the rollout role: one lent to training (multiplexed, colocated) is not rollout capacity while it trains.
Draining workers report nothing that says so: one counts until its heartbeat says stopped.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field

from seamlessflow.core.autoscale import Autoscaler, CapacitySignals, ScaleDecision
from seamlessflow.core.policies import PipelineState
from seamlessflow.core.resources import ResourceKind, Tag
from seamlessflow.scheduler.options import AutoscaleOptions
from seamlessflow.scheduler.view import ClusterView

log = logging.getLogger("seamlessflow.scheduler")
ADVICE_ONLY = "advice only: `seamlessflow scale` carries it out"
ACTED_ON = "advice, carried out by the process holding the stack: scheduler.autoscale.act"


@dataclass
class IdleMeter:
    """Each trainer's idle share over a window, from its cumulative `busy_s` at the times its heartbeats came."""

    window_s: float
    samples: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)

    def observe(self, resource_id: str, at: float, busy_s: float) -> None:
        line = self.samples.setdefault(resource_id, deque())
        if line and at <= line[-1][0]:
            return  # the same heartbeat, seen again at the next tick
        if line and busy_s < line[-1][1]:
            line.clear()  # a restarted trainer counts from 0 again
        line.append((at, busy_s))
        while len(line) > 2 and at - line[1][0] >= self.window_s:  # keep the newest sample a window old
            line.popleft()

    def idle(self, resource_id: str) -> float | None:
        line = self.samples.get(resource_id)
        if not line or len(line) < 2 or line[-1][0] <= line[0][0]:
            return None
        (t0, b0), (t1, b1) = line[0], line[-1]
        return min(1.0, max(0.0, 1.0 - (b1 - b0) / (t1 - t0)))


def capacity(view: ClusterView, pipeline: PipelineState, now: float, timeout_s: float,
             trainer_idle: float) -> tuple[CapacitySignals, int]:
    """The policy's signals and the engines it counts, from the view at `now` (see the module's docstring)."""
    rollout = [t for t in view.live(now, timeout_s)
               if t.kind is ResourceKind.ROLLOUT and t.reported.active == Tag.ROLLOUT]
    serving = [t.status.figures for t in rollout if t.status.figures.get("engine_up", 1.0) > 0]
    proxies = view.live_proxies(now, timeout_s)
    waiting = sum(view.proxy_figures.get(p, {}).get("queued", 0.0) for p in proxies)
    signals = CapacitySignals(
        waiting_sessions=int(waiting),
        queue_depth=tuple(int(f.get("requests_waiting", 0.0)) for f in serving),
        kv_use=tuple(float(f.get("kv_cache_usage", 0.0)) for f in serving),
        trajectories_waiting=pipeline.buffered, batch_threshold=pipeline.batch_threshold,
        trainer_idle=trainer_idle, engines_starting=len(rollout) - len(serving),
    )
    return signals, len(rollout)


class LiveAutoscaler:
    """The policy on the scheduler's timer; `figures()` is what the scheduler's heartbeat carries of it.

    It decides nothing for `heartbeat_timeout_s` after its first tick: after a (re)start the view holds the
    compacted topic's last heartbeats, and the live resources' heartbeats have not all arrived yet."""

    def __init__(self, options: AutoscaleOptions, heartbeat_timeout_s: float):
        self.limits = options.limits()
        self.acted_on = options.act  # by the process holding the stack, not the scheduler (`stack.scale`)
        self.policy = Autoscaler(self.limits)
        self.idle = IdleMeter(options.trainer_idle_window_s)
        self.timeout_s = heartbeat_timeout_s
        self.started: float | None = None
        self.signals, self.engines = CapacitySignals(), 0
        self.advice: ScaleDecision | None = None  # the standing decision: its target is the one published

    @property
    def target(self) -> int | None:
        return self.advice.target if self.advice else None

    def step(self, view: ClusterView, pipeline: PipelineState, now: float) -> ScaleDecision | None:
        """One evaluation; None while warming up."""
        self.started = now if self.started is None else self.started
        self.signals, self.engines = capacity(view, pipeline, now, self.timeout_s, self._trainer_idle(view, now))
        if now - self.started < self.timeout_s:
            return None
        before = self.target
        decision = self.policy.step(self.signals, self.engines, now)
        if decision.change or now - decision.changed_at >= self.limits.cooldown_s:
            self.advice = decision
        if self.target != before:
            log.info("autoscale (%s): %d -> %s engines: %s", ACTED_ON if self.acted_on else ADVICE_ONLY,
                     self.engines, self.target, decision.reason)
        return decision

    def note(self) -> str | None:
        """The standing advice and its reason in words, for the heartbeat's note (`status`, the dashboard); None
        while warming up."""
        if self.advice is None:
            return None
        return f"autoscale advice: {self.engines} -> {self.advice.target} engines ({self.advice.reason})"

    def figures(self) -> dict[str, float]:
        """Engines counted, the signals behind the decision and, once decided, the target and the change to it
        (the reason goes in the heartbeat's note: `note`)."""
        out = {
            "autoscale_engines": float(self.engines),
            "autoscale_backlog": float(self.signals.backlog),
            "autoscale_kv_use": self.signals.kv_mean,
            "autoscale_trainer_idle": self.signals.trainer_idle,
        }
        if self.target is not None:
            out.update({"autoscale_target": float(self.target), "autoscale_change": float(self.target - self.engines)})
        return out

    def _trainer_idle(self, view: ClusterView, now: float) -> float:
        """The mean idle share of the live trainers that have one yet; 0 (neutral) when none has."""
        shares = []
        for t in view.live(now, self.timeout_s):
            if t.kind is ResourceKind.TRAINER and "busy_s" in t.status.figures:
                self.idle.observe(t.reported.id, t.reported.last_heartbeat, t.status.figures["busy_s"])
                share = self.idle.idle(t.reported.id)
                if share is not None:
                    shares.append(share)
        return sum(shares) / len(shares) if shares else 0.0

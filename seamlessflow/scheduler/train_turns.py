"""The training time share (`core.train_share`) run live in the scheduler: each tick, the adapter trainers the view
holds become contenders, the share gives the turns, and the turns become roles the policy's plan steers the
trainers to (`train` holds a turn, `idle` waits: `core.scheduler.plan`'s `roles`).

Where each contender's parts come from:

- its weight: its team's `trainer.teams.<team>.share_weight` (`trainer.adapter_trainers`);
- `ready`, a batch of its team's rollouts waits: the trainer's own `steps_ready` figure (batches judged and not
  yet trained) when it reports a whole one, else the scheduler's backlog of its adapter (its team's trajectories
  since its newest version, less what no trainer will train: `ClusterView.backlog`) at a step's batch or more. A
  waiting trainer reads nothing (its source pauses in `idle`), so the backlog is what tells that it has work.

Only trainers heard from within `heartbeat_timeout_s` contend: a dead one's turn passes on at the next tick.
"""

from __future__ import annotations

from seamlessflow.core.resources import Tag
from seamlessflow.core.train_share import Contender, TrainShare
from seamlessflow.scheduler.options import TrainShareOptions
from seamlessflow.scheduler.view import ClusterView
from seamlessflow.trainer.adapter_trainers import AdapterTrainer


class TrainTurns:
    """The share on the scheduler's timer: `step` gives the roles for the plan, `figures` what its heartbeat carries."""

    def __init__(self, options: TrainShareOptions, trainers: tuple[AdapterTrainer, ...], heartbeat_timeout_s: float,
                 min_dwell_s: float = 0.0):
        self.share = TrainShare(options.share_config(min_dwell_s))
        self.trainers = {t.resource_id: t for t in trainers}
        self.timeout_s = heartbeat_timeout_s
        self.holders: frozenset[str] = frozenset()
        self.contending: tuple[str, ...] = ()

    def step(self, view: ClusterView, now: float) -> dict[str, Tag]:
        """This tick's turns, as the role each live adapter trainer should hold."""
        live = {t.reported.id: t for t in view.live(now, self.timeout_s) if t.reported.id in self.trainers}
        contenders = [Contender(rid, self.trainers[rid].share_weight, self._ready(view, rid, tracked.status.figures))
                      for rid, tracked in sorted(live.items())]
        self.holders = self.share.step(contenders, now)
        self.contending = tuple(live)
        return {rid: Tag.TRAIN if rid in self.holders else Tag.IDLE for rid in live}

    def _ready(self, view: ClusterView, resource_id: str, figures: dict[str, float]) -> bool:
        if figures.get("steps_ready", 0.0) >= 1:
            return True
        adapter = self.trainers[resource_id].adapter
        return view.backlog.get(adapter, 0) >= max(1, view.batch_trajectories)

    def figures(self) -> dict[str, float]:
        """Per team: whether its trainer holds a turn now, and the turn seconds it has held."""
        out: dict[str, float] = {}
        for rid in self.contending:
            team = self.trainers[rid].team
            out[f"train_turn:{team}"] = float(rid in self.holders)
            out[f"train_turn_s:{team}"] = self.share.held_s.get(rid, 0.0)
        return out

"""A follower rank of the trainer group: it reads nothing, and does what the leader (rank 0) orders.

Every loop turn the leader (seamlessflow/trainer/loop.py) broadcasts one `Order`, or None for a turn
without work; a follower takes its share of the step, its part of gathering the weights (a collective
under ZeRO-3; the leader writes them) and its part of DeepSpeed's checkpoint. It holds no Kafka client and
no state of its own: a restarted group resumes from the leader's checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from seamlessflow.storage import CheckpointStore
from seamlessflow.trainer.checkpoints import fetch_newest, upload_part
from seamlessflow.trainer.policy_engine import PolicyEngine


class OrderKind(StrEnum):
    STEP = "step"  # train this rank's share of the step
    EXPORT = "export"  # take part in gathering the weights of a new version
    CHECKPOINT = "checkpoint"  # save this rank's part of the checkpoint tagged `tag`
    STOP = "stop"  # exit


@dataclass(frozen=True)
class Order:
    kind: OrderKind
    tag: str = ""  # the checkpoint's tag (CHECKPOINT only)


class Follower:
    """Rank > 0: the engine's collectives, in the order the leader runs them."""

    def __init__(self, engine: PolicyEngine, checkpoints: Path, store: CheckpointStore | None = None):
        """Restores this rank's part of the latest checkpoint, as the leader restores its own (the client
        state in it is the leader's: a follower keeps none); with a store, its newest one first."""
        self.engine, self.checkpoints, self.store = engine, checkpoints, store
        fetch_newest(store, checkpoints, engine.ranks)
        engine.load_checkpoint(checkpoints)

    def run(self) -> int:
        while True:
            order: Order | None = self.engine.ranks.broadcast()
            if order is None:
                continue
            if order.kind == OrderKind.STEP:
                self.engine.train_step(None)
            elif order.kind == OrderKind.EXPORT:
                self.engine.state_dict_for_export()
            elif order.kind == OrderKind.CHECKPOINT:
                self.engine.save_checkpoint(self.checkpoints, order.tag, {})
                upload_part(self.store, self.checkpoints, order.tag, self.engine.ranks)
            elif order.kind == OrderKind.STOP:
                return 0

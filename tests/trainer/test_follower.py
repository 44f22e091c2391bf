"""A follower rank does what the leader orders, turn by turn, and the leader's loop refuses a follower rank."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from seamlessflow.config import Settings
from seamlessflow.trainer.follower import Follower, Order, OrderKind
from seamlessflow.trainer.loop import Trainer
from seamlessflow.trainer.options import TrainerOptions


class Engine:
    """Stand-in for `PolicyEngine` on a follower rank: the leader's orders come from a list."""

    def __init__(self, orders: list[Order | None]):
        self.orders, self.calls = iter(orders), []
        self.ranks = SimpleNamespace(rank=1, leader=False, broadcast=lambda: next(self.orders))

    def load_checkpoint(self, directory):
        self.calls.append(("load", directory))

    def train_step(self, groups):
        self.calls.append(("train_step", groups))

    def state_dict_for_export(self):
        self.calls.append(("export",))

    def save_checkpoint(self, directory, tag, client_state):
        self.calls.append(("checkpoint", directory, tag, client_state))


def test_a_follower_takes_its_part_of_each_order_until_told_to_stop():
    engine = Engine([None, Order(OrderKind.STEP), Order(OrderKind.EXPORT), Order(OrderKind.CHECKPOINT, "step00000001"),
                     Order(OrderKind.STOP), Order(OrderKind.STEP)])
    assert Follower(engine, Path("ckpt")).run() == 0
    assert engine.calls == [
        ("load", Path("ckpt")),
        ("train_step", None),
        ("export",),
        ("checkpoint", Path("ckpt"), "step00000001", {}),
    ]


def test_the_trainer_loop_is_the_leader_s_alone(tmp_path):
    with pytest.raises(ValueError, match="rank 1 is a follower"):
        Trainer(Settings(data_dir=str(tmp_path)), TrainerOptions(enabled=True), Engine([]))

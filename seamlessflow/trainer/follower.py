"""A follower rank of the trainer group: it reads nothing, and does what rank 0 orders, turn by turn.

Orders (broadcast by rank 0 each loop turn, see seamlessflow/trainer/loop.py): None (nothing this turn),
("step",) train this rank's share, ("export",) take part in gathering the weights (a collective under
ZeRO-3; rank 0 writes them), ("checkpoint", tag) save this rank's part of DeepSpeed's checkpoint,
("stop",) exit.
"""

from __future__ import annotations

from pathlib import Path


def follow(ranks, engine, checkpoints: Path) -> int:
    while True:
        order = ranks.broadcast()
        if order is None:
            continue
        if order[0] == "step":
            engine.train_step(None)
        elif order[0] == "export":
            engine.state_dict_for_export()
        elif order[0] == "checkpoint":
            engine.save_checkpoint(checkpoints, order[1], {})
        elif order[0] == "stop":
            return 0

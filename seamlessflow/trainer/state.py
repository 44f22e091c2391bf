"""What a trainer checkpoint carries besides DeepSpeed's model and optimizer: the leader's typed state.

Why these fields: offsets move only with checkpoints, so a restart must know where each partition resumes,
which trajectories above those points were already trained (not to train them twice), the step and version
it had reached, and the tasks found too easy (SRPO: no signal left in them). DeepSpeed stores the dict
beside its own keys in the same file, hence the `sf_` prefix; the keys are the ones written since the first
checkpoints, so every checkpoint ever written loads (`from_dict` ignores DeepSpeed's keys).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class TrainerState:
    step: int = 0
    version: int = 0  # the newest weight version published when the checkpoint was taken
    offsets: dict[int, int] = field(default_factory=dict)  # partition -> first offset not yet trained
    finished_ids: list[str] = field(default_factory=list)  # trajectories finished above those offsets
    too_easy_tasks: list[str] = field(default_factory=list)  # the newest, oldest first (sorted before)

    def to_dict(self) -> dict[str, Any]:
        return {
            "sf_step": self.step, "sf_version": self.version,
            "sf_offsets": {str(partition): offset for partition, offset in self.offsets.items()},
            "sf_finished_ids": list(self.finished_ids),
            "sf_too_easy": list(self.too_easy_tasks),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainerState:
        """A checkpoint's client state (an empty dict: no checkpoint yet, so a fresh start)."""
        return cls(
            step=int(data.get("sf_step", 0)), version=int(data.get("sf_version", 0)),
            offsets={int(p): int(o) for p, o in data.get("sf_offsets", {}).items()},
            finished_ids=list(data.get("sf_finished_ids", [])),
            too_easy_tasks=list(data.get("sf_too_easy", [])),
        )

"""Task sources of the rollout manager: each a task set with its kind (which agent pool runs it), its
share of every batch (`weight`) and, optionally, the verifier its sessions are scored with.

Without `manager.sources` the manager has one source built from `manager.source` / `kind`, named
`default`, whose task ids are the task file's own (as before sources existed). Named sources prefix their
task ids with `<name>:`, so two sources may share a file or a demo seed without their tasks colliding.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from seamlessflow.scheduler.options import SourceOptions
from seamlessflow.tasks import ArithmeticTask, generate_tasks, load_tasks

DEFAULT = "default"


def load_task_set(source: str, demo_seed: int, demo_count: int, demo_max_operand: int = 99) -> list[ArithmeticTask]:
    return generate_tasks(demo_seed, demo_count, demo_max_operand) if source == "demo" else load_tasks(source)


@dataclass
class TaskSource:
    name: str
    tasks: list[ArithmeticTask]
    kind: str
    weight: float = 1.0
    verifier: str | None = None
    team: str | None = None
    cursor: int = 0  # position in the endless cycle over `tasks` of the next task to publish
    published: int = 0
    finished: int = 0
    reward_sum: float = 0.0  # over sessions that ended in a trainable status
    reward_count: int = 0
    position_of: dict[str, int] = field(init=False)

    def __post_init__(self) -> None:
        if not self.tasks:
            raise ValueError(f"task source {self.name!r} has no tasks")
        self.position_of = {t.task_id: i for i, t in enumerate(self.tasks)}

    def figures(self) -> dict[str, float]:
        mean = self.reward_sum / self.reward_count if self.reward_count else 0.0
        return {f"source.{self.name}.tasks_published": self.published,
                f"source.{self.name}.groups_finished": self.finished,
                f"source.{self.name}.mean_reward": mean}


def named(options: SourceOptions) -> TaskSource:
    tasks = [dataclasses.replace(t, task_id=f"{options.name}:{t.task_id}")
             for t in load_task_set(options.source, options.demo_seed, options.demo_count,
                                    options.demo_max_operand)]
    return TaskSource(options.name, tasks, options.kind, options.weight, options.verifier, options.team)

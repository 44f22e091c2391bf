"""The eval set of a task source: fixed questions asked of every evaluated policy version.

The seeded demo source gets a held-out set drawn with another seed (questions may repeat a training one by
chance, as in any split of a small space, but the set is fixed). A JSONL source gets its own `eval_file`
when one is named, else its first `count` tasks (then not held out: the README says so).
"""

from __future__ import annotations

from seamlessflow.tasks.arithmetic import ArithmeticTask, generate_tasks
from seamlessflow.tasks.loader import load_tasks

EVAL_SEED_OFFSET = 1_000_003  # the same offset the tiny model's build holds its warm-start eval set out with
DEMO_SOURCE = "demo"


def eval_set(source: str, count: int, demo_seed: int = 0, max_operand: int = 99,
             eval_file: str | None = None) -> list[ArithmeticTask]:
    if eval_file:
        return load_tasks(eval_file)[:count]
    if source == DEMO_SOURCE:
        return generate_tasks(demo_seed + EVAL_SEED_OFFSET, count, max_operand, prefix="eval")
    return load_tasks(source)[:count]

"""Demo tasks: verifiable questions with a graded reward (see arithmetic.py)."""

from seamlessflow.tasks.arithmetic import (
    ArithmeticTask,
    extract_answer,
    generate_tasks,
    score_completion,
)
from seamlessflow.tasks.loader import load_tasks, write_tasks

__all__ = [
    "ArithmeticTask",
    "extract_answer",
    "generate_tasks",
    "load_tasks",
    "score_completion",
    "write_tasks",
]

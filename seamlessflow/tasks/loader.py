"""JSONL task files: one `{"task_id", "prompt", "answer", ...}` object per line.

Lets a run use a fixed task set (written once, versioned with the experiment) instead
of regenerating from a seed. Fields beyond the three go into each published task's payload as they are
(a code task's `function` and `tests`, say), for the agent of the task's kind.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path

from seamlessflow.tasks.arithmetic import ArithmeticTask

_FIELDS = ("task_id", "prompt", "answer")


def write_tasks(path: str | Path, tasks: Iterable[ArithmeticTask]) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for task in tasks:
            out.write(json.dumps({**dict(task.extra), **{name: getattr(task, name) for name in _FIELDS}}) + "\n")


def load_tasks(path: str | Path) -> list[ArithmeticTask]:
    """Blank lines are skipped; a line missing a field fails with its line number."""
    tasks = []
    with open(path, encoding="utf-8") as source:
        for number, line in enumerate(source, start=1):
            if not line.strip():
                continue
            record = json.loads(line)
            missing = [name for name in _FIELDS if name not in record]
            if missing:
                raise ValueError(f"{path}:{number}: missing field(s) {', '.join(missing)}")
            extra = tuple(sorted((k, v) for k, v in record.items() if k not in _FIELDS))
            tasks.append(ArithmeticTask(str(record["task_id"]), str(record["prompt"]), str(record["answer"]), extra))
    return tasks

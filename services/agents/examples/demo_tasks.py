"""Tasks for the four example agents (publish them with `seamlessflow.agents.publish_tasks`)."""

from seamlessflow.agents import make_task
from seamlessflow.messages import Task
from seamlessflow.tasks import generate_tasks
from seamlessflow.tasks.arithmetic import expression_of


def arithmetic(kind: str, count: int, seed: int = 0, group_size: int = 2, team: str = "default") -> list[Task]:
    """Tasks for single_turn / tool_use / history_rewrite (kind names the agent family)."""
    return [make_task(kind, t.prompt, {"answer": t.answer, "expression": expression_of(t.prompt)}, group_size,
                      task_id=f"{kind}-{t.task_id}", team=team) for t in generate_tasks(seed, count)]


def coding(group_size: int = 2, team: str = "default", with_hanging_setup: bool = False) -> list[Task]:
    tests = [[[1, 2], 3], [[0, 0], 0], [[-4, 9], 5]]
    tasks = [make_task("code", "Write `add(a, b)` that returns a + b.", {"function": "add", "tests": tests},
                       group_size, task_id="code-add", team=team)]
    if with_hanging_setup:  # an environment that never finishes: must time out without blocking others
        tasks.append(make_task("code", "Write `add(a, b)`.", {"function": "add", "tests": tests,
                                                               "setup": "while True: pass"},
                               group_size, task_id="code-hang", team=team))
    return tasks

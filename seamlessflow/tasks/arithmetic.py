"""Small-number arithmetic: a verifiable demo task with a graded reward.

Pure (standard library only) so the reward can run anywhere: in an agent, in the
simulator, in tests. Exact answers score 1.0; a wrong number still earns partial
credit for being close and for having the right digit count, so a weak policy gets a
gradient to climb before it is ever exactly right.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

EXACT_REWARD = 1.0
DIGIT_COUNT_CREDIT = 0.1
CLOSENESS_CREDIT = 0.4
_FIRST_INTEGER = re.compile(r"-?\d+")
_PROMPT = re.compile(r"What is (-?\d+[+-]-?\d+)\?")


@dataclass(frozen=True)
class ArithmeticTask:
    """One question with its exact answer; `task_id` is stable across runs for one seed."""

    task_id: str
    prompt: str
    answer: str
    extra: tuple[tuple[str, object], ...] = ()  # a task file's other fields, handed to the agent in the payload


def make_prompt(left: int, op: str, right: int) -> str:
    return f"What is {left}{op}{right}?"


def expression_of(prompt: str) -> str:
    """The sum a prompt asks for ("51+48" from "What is 51+48?"): the inverse of `make_prompt`."""
    match = _PROMPT.fullmatch(prompt)
    if match is None:
        raise ValueError(f"not an arithmetic prompt: {prompt!r}")
    return match.group(1)


def solve(left: int, op: str, right: int) -> int:
    if op == "+":
        return left + right
    if op == "-":
        return left - right
    raise ValueError(f"unsupported operator {op!r}")


def generate_tasks(
    seed: int,
    count: int,
    max_operand: int = 99,
    ops: tuple[str, ...] = ("+",),
    prefix: str = "arith",
) -> list[ArithmeticTask]:
    """The same seed always gives the same tasks, in the same order."""
    rng = random.Random(seed)
    tasks = []
    for index in range(count):
        left, right = rng.randint(0, max_operand), rng.randint(0, max_operand)
        op = rng.choice(ops)
        tasks.append(
            ArithmeticTask(
                task_id=f"{prefix}-{seed}-{index}",
                prompt=make_prompt(left, op, right),
                answer=str(solve(left, op, right)),
            )
        )
    return tasks


def extract_answer(completion: str) -> int | None:
    """The first integer in the completion, or None when there is none."""
    match = _FIRST_INTEGER.search(completion)
    return int(match.group()) if match else None


def score_completion(completion: str, answer: str) -> float:
    """Reward in [0, 1]: 1.0 exact, at most 0.5 for a near miss, 0.0 without a number."""
    guess = extract_answer(completion)
    if guess is None:
        return 0.0
    truth = int(answer)
    if guess == truth:
        return EXACT_REWARD
    same_digit_count = len(str(abs(guess))) == len(str(abs(truth)))
    closeness = max(0.0, 1.0 - abs(guess - truth) / max(abs(truth), 10))
    return DIGIT_COUNT_CREDIT * same_digit_count + CLOSENESS_CREDIT * closeness

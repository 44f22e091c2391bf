"""Agent sessions for assembler tests: random ones with forks, retries and duplicates (a hypothesis strategy),
and seeded multi-turn ones.

A random "agent" keeps the histories it has seen (each earlier call's prompt + completion) and issues calls
that extend one (with tool/user gap tokens), rewrite one (cut and diverge), retry a prompt, sample n>1
choices, restart from scratch, or resend an earlier call (duplicate). A small token alphabet makes
accidental shared prefixes common, which is where matching goes wrong.
"""

from __future__ import annotations

import random

from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from seamlessflow.core.prefix_tree import Call

TOKENS = st.integers(min_value=0, max_value=4)


@st.composite
def sessions(draw: st.DrawFn, max_calls: int = 25, max_chunk: int = 6) -> list[Call]:
    calls: list[Call] = []
    sent: list[Call] = []
    for i in range(draw(st.integers(1, max_calls))):
        kind = draw(st.sampled_from(["extend", "extend", "extend", "rewrite", "retry", "n", "restart", "dup"]))
        if not calls or kind == "restart":
            prompt = draw(st.lists(TOKENS, min_size=1, max_size=max_chunk))
        elif kind == "dup":
            sent.append(draw(st.sampled_from(calls)))
            continue
        else:
            base = draw(st.sampled_from(calls))
            history = list(base.prompt_ids) + list(base.completion_ids)
            if kind == "extend":
                prompt = history + draw(st.lists(TOKENS, max_size=max_chunk))
            elif kind == "rewrite":
                cut = draw(st.integers(0, len(history)))
                prompt = history[:cut] + draw(st.lists(TOKENS, min_size=1, max_size=max_chunk))
            else:
                prompt = list(base.prompt_ids)
        n_choices = draw(st.integers(2, 3)) if kind == "n" else 1
        for choice in range(n_choices):
            completion = draw(st.lists(TOKENS, max_size=max_chunk))
            logprobs = draw(st.lists(st.floats(-20, 0), min_size=len(completion), max_size=len(completion)))
            version = draw(st.integers(0, 3))
            new = Call(f"c{i}:{choice}", prompt, completion, logprobs, [version] * len(completion))
            if new.prompt_ids or new.completion_ids:
                calls.append(new)
                sent.append(new)
    return sent


def forty_sessions() -> list[list[Call]]:
    """Forty random sessions with forks and retries, the same every run."""
    found: list[list[Call]] = []

    @hsettings(max_examples=1, derandomize=True, database=None, suppress_health_check=list(HealthCheck))
    @given(st.lists(sessions(max_calls=6), min_size=40, max_size=40))
    def draw(sessions: list[list[Call]]) -> None:
        found[:] = sessions

    draw()
    return found


def multi_turn_sessions(n_sessions: int, turns: int, rng: random.Random, prefix: str) -> dict[str, list[Call]]:
    sessions = {}
    for s in range(n_sessions):
        history, calls = [rng.randrange(100) for _ in range(5)], []
        for t in range(turns):
            prompt = history + [rng.randrange(100) for _ in range(rng.randrange(4))]
            if t and rng.random() < 0.15:  # rewrite history now and then: a fork
                prompt = prompt[: rng.randrange(1, len(prompt))] + [999]
            completion = [rng.randrange(100) for _ in range(rng.randrange(1, 6))]
            calls.append(Call(f"{prefix}{s}c{t}.0", prompt, completion,
                              [-rng.random() for _ in completion], [t // 3] * len(completion)))
            history = prompt + completion
        sessions[f"{prefix}{s}"] = calls
    return sessions

"""Steps that share prefixes, for the tree-training tests across ranks (tests/trainer/test_ranks.py): GRPO
groups on one system prompt, multi-turn sessions forked by rewrites (assembled by the session assembler
itself), and a step that shares nothing. Token ids stay below the tiny test model's 32 and sequences within
its 128 positions."""

from __future__ import annotations

import random

from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.core.assembler import SessionAssembler
from seamlessflow.core.batching import KeptGroup, TrajectorySample
from seamlessflow.core.prefix_tree import Call

SYSTEM = [1, 2, 3, 4]  # every group's prompt starts with it: the whole step is one tree, cut between groups


def _sample(name: str, group: str, tokens: list[int], mask: list[int], logprobs: list[float],
            versions: list[int], reward: float) -> TrajectorySample:
    return TrajectorySample(name, group, "t", tuple(tokens), tuple(mask), tuple(logprobs), tuple(versions), reward)


def grpo_groups(groups: int = 4, size: int = 4, seed: int = 0) -> list[KeptGroup]:
    """``groups`` groups of ``size`` completions, each group on its own prompt after the shared system prompt."""
    rng = random.Random(seed)
    kept = []
    for g in range(groups):
        prompt = [*SYSTEM, 5 + g] + [rng.randrange(1, 32) for _ in range(rng.randrange(6, 12))]
        samples = []
        for i in range(size):
            completion = [rng.randrange(1, 32) for _ in range(rng.randrange(3, 9))]
            samples.append(_sample(f"g{g}s{i}", f"g{g}", prompt + completion, [0] * len(prompt) + [1] * len(completion),
                                   [0.0] * len(prompt) + [-3 * rng.random() for _ in completion],
                                   [-1] * len(prompt) + [0] * len(completion), float(i % 2)))
        kept.append(KeptGroup(f"g{g}", "t", samples, [1.0, 0.5, 1.0, 1.0][:size] + [1.0] * max(size - 4, 0)))
    return kept


def forked_sessions(sessions: int = 3, seed: int = 1) -> list[KeptGroup]:
    """Multi-turn sessions, each rewritten twice (a fork inside the last generation), as the assembler emits
    them: the branches share the history before the rewrite, generated (trained) tokens included. One group per
    session (its branches' rewards differ)."""
    rng = random.Random(seed)
    kept = []
    for s in range(sessions):
        assembler = SessionAssembler(AssemblerOptions().assembler_config())
        history = [20 + s] + [rng.randrange(1, 32) for _ in range(5)]
        calls: list[Call] = []
        for turn in range(5):
            prompt = history + [rng.randrange(1, 32) for _ in range(rng.randrange(1, 4))]  # a tool's output
            if turn in (2, 4):  # rewrite: cut the history back into the last generation and diverge
                prompt = history[: len(calls[-1].prompt_ids) + 2] + [31, rng.randrange(1, 30)]
            completion = [rng.randrange(1, 32) for _ in range(rng.randrange(2, 6))]
            call = Call(f"s{s}c{turn}", prompt, completion, [-2 * rng.random() for _ in completion],
                        [0] * len(completion))
            assembler.add(call)
            calls.append(call)
            history = list(prompt) + completion
        samples = [_sample(f"s{s}b{leaf.branch_id}", f"s{s}", leaf.tokens, leaf.loss_mask, leaf.logprobs,
                           leaf.versions, float(b % 2) + 0.25 * b)
                   for b, leaf in enumerate(assembler.finish())]
        kept.append(KeptGroup(f"s{s}", "t", samples, [1.0] * len(samples)))
    return kept


def unshared_groups(seed: int = 2) -> list[KeptGroup]:
    """Two groups whose sequences share no first token: nothing to share, so a tree step trains it flat."""
    rng = random.Random(seed)
    kept = []
    for g in range(2):
        samples = []
        for i in range(4):
            tokens = [1 + 4 * g + i] + [rng.randrange(1, 32) for _ in range(rng.randrange(4, 14))]
            prompt = rng.randrange(1, len(tokens) - 1)
            mask = [0] * prompt + [1] * (len(tokens) - prompt)
            samples.append(_sample(f"u{g}{i}", f"u{g}", tokens, mask, [-2 * rng.random() * m for m in mask],
                                   [0 if m else -1 for m in mask], float(i % 2)))
        kept.append(KeptGroup(f"u{g}", "t", samples, [1.0] * 4))
    return kept


STEPS = {"grpo": grpo_groups, "sessions": forked_sessions, "unshared": unshared_groups}

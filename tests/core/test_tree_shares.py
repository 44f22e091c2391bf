"""Rank shares on trees: every sequence once, a shared prefix kept on one rank unless cutting it is what
balances the ranks, the largest rank's tree tokens close to the best possible."""

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seamlessflow.core.micro_batches import split_across_ranks
from seamlessflow.core.token_tree import build_tree
from seamlessflow.core.tree_shares import TOLERANCE, common_prefix, split_trees_across_ranks


def tree_tokens(sequences, share) -> int:
    return build_tree([sequences[i] for i in share]).size if share else 0


def grpo_step(groups: int, samples: int, prompt: int, completion: int, system: list[int] | None = None,
              seed: int = 0) -> tuple[list[list[int]], list[int]]:
    """Sequences and their group index: each group's samples share a prompt (after ``system``, if given)."""
    rng = random.Random(seed)
    sequences, group_of = [], []
    for g in range(groups):
        shared = (system or []) + [100 + g] + [rng.randrange(1, 50) for _ in range(prompt - 1)]
        for s in range(samples):  # completions differ from their first token
            sequences.append(shared + [200 + s] + [rng.randrange(50, 99) for _ in range(completion - 1)])
            group_of.append(g)
    return sequences, group_of


def groups_per_rank(plan, group_of) -> list[set[int]]:
    return [{group_of[i] for i in share} for share in plan.shares]


def test_common_prefix():
    assert common_prefix((1, 2, 3), (1, 2, 4)) == 2
    assert common_prefix((1, 2), (1, 2, 4)) == 2
    assert common_prefix((), (1,)) == 0 and common_prefix((5,), (6,)) == 0


def test_grpo_groups_stay_whole_and_the_ranks_balance_by_tree_tokens():
    sequences, group_of = grpo_step(groups=4, samples=8, prompt=64, completion=8)
    plan = split_trees_across_ranks(sequences, 2)
    assert sorted(len(g) for g in groups_per_rank(plan, group_of)) == [2, 2]
    assert all(len({r for r, gs in enumerate(groups_per_rank(plan, group_of)) if g in gs}) == 1 for g in range(4))
    assert plan.tree_tokens == [2 * (64 + 8 * 8)] * 2 == [tree_tokens(sequences, s) for s in plan.shares]
    flat = split_across_ranks([len(s) for s in sequences], 2)  # by length, every group on both ranks
    assert max(tree_tokens(sequences, s) for s in flat) == 4 * 64 + 16 * 8  # every prompt on each rank: 1.5x


def test_a_shared_system_prompt_is_cut_at_the_groups_and_computed_once_per_rank():
    """The whole step is one tree (a system prompt): it must be cut, at the branch point between groups."""
    sequences, group_of = grpo_step(groups=4, samples=4, prompt=16, completion=4, system=[7] * 32)
    plan = split_trees_across_ranks(sequences, 2)
    assert sorted(len(g) for g in groups_per_rank(plan, group_of)) == [2, 2]
    assert plan.tree_tokens == [32 + 2 * (16 + 4 * 4)] * 2


def test_a_group_is_cut_only_when_that_balances_the_ranks():
    # three groups on two ranks, long completions: one rank with two whole groups would do 1.6x the other's
    # work; cutting one group at its branch point (its prompt twice) brings the largest rank down
    sequences, group_of = grpo_step(groups=3, samples=8, prompt=16, completion=64)
    plan = split_trees_across_ranks(sequences, 2)
    whole = 2 * (16 + 8 * 64)
    assert plan.largest < (1 - TOLERANCE) * whole
    assert sum(len(g) for g in groups_per_rank(plan, group_of)) == 4  # exactly one group spans the ranks
    # a long shared prompt: cutting a group would compute it again for little; the groups stay whole
    sequences, group_of = grpo_step(groups=3, samples=8, prompt=512, completion=4)
    plan = split_trees_across_ranks(sequences, 2)
    assert sum(len(g) for g in groups_per_rank(plan, group_of)) == 3


def test_a_forked_session_stays_on_one_rank():
    history = list(range(1, 41))
    session = [history + [50, 51, 52], history[:30] + [60, 61], history + [70]]  # two rewrites
    other = [[90 + i] + list(range(200, 230)) for i in range(3)]  # three unrelated sequences
    plan = split_trees_across_ranks(session + other, 2)
    assert any({0, 1, 2} <= set(share) for share in plan.shares)
    assert sorted(plan.tree_tokens) == [2 * 31, 40 + 3 + 2 + 1 + 31]  # the session's history once


def test_identical_and_prefix_sequences_are_never_cut_apart():
    plan = split_trees_across_ranks([[1, 2, 3], [1, 2, 3], [1, 2], [1, 2, 3, 4]], 4)
    assert sorted(map(len, plan.shares)) == [0, 0, 0, 4] and plan.largest == 4


def test_edges():
    assert split_trees_across_ranks([], 2).shares == [[], []]
    assert split_trees_across_ranks([[5, 6]], 3).shares == [[0], [], []]
    assert split_trees_across_ranks([[1], [2]], 1).shares == [[0, 1]]
    with pytest.raises(ValueError):
        split_trees_across_ranks([[1]], 0)


def lower_bound(sequences, ranks) -> float:
    """No plan's largest rank computes less than the step's trie over the ranks."""
    return build_tree(sequences).size / ranks


steps = st.lists(  # groups: (prompt length, completions as lengths), tokens drawn from a small alphabet
    st.tuples(st.integers(1, 12), st.lists(st.integers(0, 12), min_size=1, max_size=6)), min_size=0, max_size=10)


@settings(max_examples=200, deadline=None)
@given(steps, st.integers(1, 5), st.integers(0, 3), st.integers(0, 2**16))
def test_properties(groups, ranks, system, seed):
    rng = random.Random(seed)
    sequences, group_of = [], []
    for g, (prompt, completions) in enumerate(groups):
        shared = [1] * system + [rng.randrange(1, 4) for _ in range(prompt)]
        for c in completions:
            sequences.append(shared + [rng.randrange(1, 4) for _ in range(c)])
            group_of.append(g)
    plan = split_trees_across_ranks(sequences, ranks)
    assert len(plan.shares) == ranks
    assert sorted(i for share in plan.shares for i in share) == list(range(len(sequences)))  # each exactly once
    assert plan.tree_tokens == [tree_tokens(sequences, share) for share in plan.shares]
    assert plan == split_trees_across_ranks(sequences, ranks)  # deterministic
    # never worse than keeping every root tree whole, nor (beyond the tolerance) than dealing by length
    whole = split_trees_across_ranks(sequences, ranks, tolerance=1.0)  # no cut ever pays: root trees whole
    rank_of = {i: r for r, share in enumerate(whole.shares) for i in share}
    assert len({(s[0] if s else None, rank_of[i]) for i, s in enumerate(sequences)}) == \
           len({s[0] if s else None for s in sequences})  # sequences on one first token share a rank
    if plan != whole:  # a tree is cut across ranks only when that lowers the busiest rank by the tolerance
        assert plan.largest < whole.largest * (1 - TOLERANCE)
    if whole.largest * (1 - TOLERANCE) <= lower_bound(sequences, ranks):  # whole trees balance: none is cut
        assert plan == whole
    flat = max(tree_tokens(sequences, share) for share in split_across_ranks([len(s) for s in sequences], ranks))
    assert plan.largest * (1 - TOLERANCE) <= flat
    assert plan.largest >= lower_bound(sequences, ranks) if sequences else plan.largest == 0

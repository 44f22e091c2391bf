"""Micro-batch planning: every sequence once, the token budget held, packing balanced, padding small."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from seamlessflow.core.micro_batches import (
    micro_batch_cost,
    plan_micro_batches,
    plan_tree_micro_batches,
    split_across_ranks,
)
from seamlessflow.core.token_tree import build_tree


def test_packed_bins_are_balanced_by_tokens():
    lengths = [400, 300, 300, 200, 200, 100]  # first-fit alone: 400+300+300 and 200+200+100 (1000, 500)
    plan = plan_micro_batches(lengths, max_tokens=1000, packed=True)
    assert sorted(micro_batch_cost([lengths[i] for i in b], True) for b in plan) == [700, 800]


def test_padded_runs_group_similar_lengths():
    lengths = [10, 100, 12, 98, 11, 97]
    plan = plan_micro_batches(lengths, max_tokens=300, packed=False)
    assert [sorted(lengths[i] for i in b) for b in plan] == [[97, 98, 100], [10, 11, 12]]


def test_an_over_long_sequence_goes_alone_and_sequence_caps_hold():
    plan = plan_micro_batches([50, 5, 5, 5], max_tokens=20, max_sequences=2, packed=True)
    assert [0] in plan and sorted(len(b) for b in plan) == [1, 1, 2]
    assert plan_micro_batches([3, 1, 2], max_sequences=2, packed=False) == [[0, 2], [1]]
    assert plan_micro_batches([3, 1, 2]) == [[0, 2, 1]]


@given(st.lists(st.integers(1, 300), max_size=40), st.integers(1, 600), st.none() | st.integers(1, 8), st.booleans())
def test_every_sequence_once_and_the_budget_respected(lengths, budget, max_sequences, packed):
    plan = plan_micro_batches(lengths, max_tokens=budget, max_sequences=max_sequences, packed=packed)
    assert sorted(i for b in plan for i in b) == list(range(len(lengths)))
    for b in plan:
        assert b, "no empty micro-batch"
        assert micro_batch_cost([lengths[i] for i in b], packed) <= budget or len(b) == 1
        assert max_sequences is None or len(b) <= max_sequences
    if packed and max_sequences is None:  # never more bins than first-fit decreasing needs, plus stragglers
        assert len(plan) <= len(lengths)


def test_rank_shares_are_balanced_by_tokens_and_cover_every_sequence_once():
    lengths = [1000, 10, 10, 10, 10, 10, 10, 500, 490]
    shares = split_across_ranks(lengths, 2)
    assert sorted(i for share in shares for i in share) == list(range(len(lengths)))
    loads = [sum(lengths[i] for i in share) for share in shares]
    assert sorted(loads) == [1020, 1030]  # by count (5 and 4 sequences) it could be ~1500 tokens against 550
    assert split_across_ranks(lengths, 2) == shares  # deterministic: every rank could compute it alike
    assert split_across_ranks([7], 3) == [[0], [], []]  # fewer sequences than ranks: some get none
    assert split_across_ranks([], 2) == [[], []]
    with pytest.raises(ValueError):
        split_across_ranks([1], 0)


def test_a_group_on_one_prompt_is_one_tree_when_its_tree_tokens_fit():
    prompt = list(range(1, 2049))
    group = [prompt + [5000 + i] * 256 for i in range(8)]  # P 2048, C 256, G 8: 4096 tree tokens, 18 432 flat
    assert plan_tree_micro_batches(group, 4608) == [list(range(8))]
    halves = plan_tree_micro_batches(group, 3000)  # cut at the branch point: the prompt computed once per part
    assert [len(b) for b in halves] == [3, 3, 2]


@given(st.lists(st.lists(st.integers(1, 3), min_size=1, max_size=6), min_size=1, max_size=12), st.integers(1, 20))
def test_tree_micro_batches_take_each_sequence_once_and_keep_the_tree_budget(sequences, budget):
    batches = plan_tree_micro_batches(sequences, budget)
    assert sorted(i for b in batches for i in b) == list(range(len(sequences)))
    for batch in batches:
        assert len(batch) == 1 or build_tree([sequences[i] for i in batch]).size <= budget

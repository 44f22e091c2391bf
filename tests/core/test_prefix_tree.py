"""Readable cases for the prefix tree: small ids so each case is visible at a glance."""

from array import array

import pytest

from seamlessflow.core.prefix_tree import Call, InvalidCall, Outcome, PrefixTree, common_prefix_len


def call(call_id, prompt, completion, version=0):
    return Call(call_id, prompt, completion, [-0.5 - i for i in range(len(completion))],
                [version] * len(completion))


def ids(*values):
    return array("i", values)


def test_common_prefix_len():
    assert common_prefix_len(ids(1, 2, 3), ids(1, 2, 3, 4), 0) == 3
    assert common_prefix_len(ids(1, 2, 9), ids(1, 2, 3), 0) == 2
    assert common_prefix_len(ids(3, 4), ids(1, 2, 3, 4), 2) == 2
    assert common_prefix_len(ids(5), ids(1, 2), 0) == 0
    assert common_prefix_len(ids(1, 2), ids(1, 2), 2) == 0


def test_first_call_starts_a_root_with_prompt_masked_out():
    tree = PrefixTree()
    assert tree.insert(call("a", [1, 2, 3], [4, 5])) is Outcome.START
    (leaf,) = tree.leaves()
    assert leaf.tokens == [1, 2, 3, 4, 5]
    assert leaf.loss_mask == [0, 0, 0, 1, 1]
    assert leaf.logprobs == [0.0, 0.0, 0.0, -0.5, -1.5]
    assert leaf.versions == [-1, -1, -1, 0, 0]


def test_extension_appends_gap_with_mask_0_and_completion_with_mask_1():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3], version=0))
    assert tree.insert(call("b", [1, 2, 3, 7, 8], [9], version=1)) is Outcome.EXTENSION
    (leaf,) = tree.leaves()
    assert leaf.tokens == [1, 2, 3, 7, 8, 9]
    assert leaf.loss_mask == [0, 0, 1, 0, 0, 1]
    assert leaf.versions == [-1, -1, 0, -1, -1, 1]
    assert [(e.call_id, e.start, e.end) for e in leaf.lineage] == [("a", 0, 3), ("b", 3, 6)]


def test_rewritten_history_forks_and_leaves_the_old_branch_intact():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3]))
    tree.insert(call("b", [1, 2, 3, 4], [5]))
    assert tree.insert(call("c", [1, 2, 6], [7])) is Outcome.FORK
    old, new = tree.leaves()
    assert old.tokens == [1, 2, 3, 4, 5] and old.branch_id == 0
    assert new.tokens == [1, 2, 6, 7] and new.branch_id == 1
    assert new.loss_mask == [0, 0, 0, 1]


def test_retry_of_the_same_prompt_is_a_fork_keeping_both_samples():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3, 4]))
    assert tree.insert(call("a-retry", [1, 2], [3, 4])) is Outcome.FORK
    assert [leaf.tokens for leaf in tree.leaves()] == [[1, 2, 3, 4], [1, 2, 3, 4]]


def test_n_choices_become_sibling_branches_and_each_can_be_extended():
    tree = PrefixTree()
    tree.insert(call("a:0", [1], [2]))
    tree.insert(call("a:1", [1], [3]))
    tree.insert(call("a:2", [1], [4]))
    assert tree.insert(call("b", [1, 3, 9], [10])) is Outcome.EXTENSION
    assert [leaf.tokens for leaf in tree.leaves()] == [[1, 2], [1, 3, 9, 10], [1, 4]]


def test_fork_inside_a_completion_keeps_the_generated_prefix_and_its_logprobs():
    tree = PrefixTree()
    tree.insert(call("a", [1], [2, 3, 4]))
    assert tree.insert(call("b", [1, 2, 3, 8], [9])) is Outcome.FORK
    _, new = tree.leaves()
    assert new.tokens == [1, 2, 3, 8, 9]
    assert new.loss_mask == [0, 1, 1, 0, 1]
    assert new.logprobs[:3] == [0.0, -0.5, -1.5]
    assert [(e.call_id, e.start, e.end) for e in new.lineage] == [("a", 0, 3), ("b", 3, 5)]


def test_no_common_prefix_restarts_with_a_new_root():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3]))
    assert tree.insert(call("b", [7, 8], [9])) is Outcome.RESTART
    assert [leaf.tokens for leaf in tree.leaves()] == [[1, 2, 3], [7, 8, 9]]


def test_prompt_ending_at_a_branch_point_forks_from_there():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3]))
    tree.insert(call("b", [1, 2], [4]))  # splits [1, 2, 3] at 2
    assert tree.insert(call("c", [1, 2, 5], [6])) is Outcome.FORK
    assert [leaf.tokens for leaf in tree.leaves()] == [[1, 2, 3], [1, 2, 4], [1, 2, 5, 6]]


def test_empty_completion_is_stored_as_gap_only():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], []))
    assert tree.insert(call("b", [1, 2, 3], [4])) is Outcome.EXTENSION
    (leaf,) = tree.leaves()
    assert leaf.loss_mask == [0, 0, 0, 1]


def test_shared_prefixes_are_counted_once():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2, 3], [4]))
    tree.insert(call("b", [1, 2, 3], [5]))
    assert tree.total_tokens == 5


def test_budget_refuses_a_call_that_would_overflow():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3]))
    assert tree.insert(call("b", [1, 2, 3, 4], [5]), budget=4) is Outcome.TRUNCATED
    assert tree.total_tokens == 3


def test_plain_data_round_trip_keeps_matching_behaviour():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3]))
    tree.insert(call("b", [1, 2], [4]))
    copy = PrefixTree.from_dict(tree.to_dict())
    assert copy.leaves() == tree.leaves()
    assert copy.insert(call("c", [1, 2, 4, 5], [6])) is Outcome.EXTENSION
    assert tree.leaves()[1].tokens == [1, 2, 4]  # the original is untouched


def test_call_validation():
    with pytest.raises(InvalidCall):
        Call("x", [1], [2, 3], [0.1], [0, 0]).validate()
    with pytest.raises(InvalidCall):
        Call("x", [], [], [], []).validate()


def test_an_id_beyond_int32_is_refused_before_anything_is_stored():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3]))
    with pytest.raises(InvalidCall, match="not int32"):
        tree.insert(call("b", [1, 2, 3, 2**31], [4]))
    with pytest.raises(InvalidCall, match="not int32"):
        tree.insert(call("c", [1, 2, 3], [4], version=2**40))
    with pytest.raises(InvalidCall, match="logprobs that are not floats"):
        tree.insert(Call("d", [1, 2, 3], [4], ["x"], [0]))
    assert [leaf.tokens for leaf in tree.leaves()] == [[1, 2, 3]] and tree.total_tokens == 3


def test_nodes_hold_typed_arrays_and_leaves_read_out_as_lists():
    tree = PrefixTree()
    tree.insert(call("a", [1, 2], [3]))
    tree.insert(call("b", [1, 2, 3, 4], [5]))
    node = tree.nodes[0]
    assert (node.tokens.typecode, node.mask.typecode, node.logprobs.typecode, node.versions.typecode) == \
        ("i", "b", "d", "i")
    leaf = tree.leaves()[0]
    assert leaf.tokens == [1, 2, 3, 4, 5] and leaf.loss_mask == [0, 0, 1, 0, 1]
    assert leaf.logprobs == [0.0, 0.0, -0.5, 0.0, -0.5] and leaf.versions == [-1, -1, 0, -1, 0]

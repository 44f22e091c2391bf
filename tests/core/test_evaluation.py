"""When an eval pass is due, which version it is pinned to, how its sessions are tagged, what it measures."""

import pytest

from seamlessflow.core.evaluation import (
    EvalOutcome,
    eval_group_id,
    is_due,
    is_eval_group,
    pin,
    served_version,
    summarize,
)


def test_eval_group_ids_are_recognised_and_ordinary_ones_are_not():
    assert is_eval_group(eval_group_id("run1", 7, "eval-0-3"))
    assert eval_group_id("run1", 7, "eval-0-3") == "eval/run1/v7/eval-0-3"
    assert not is_eval_group("run1.arith-0-3.r0")
    assert not is_eval_group("")


@pytest.mark.parametrize(("served", "last", "every", "due"), [
    (None, None, 5, False),  # engines disagree: nothing is pinned yet
    (0, None, 5, True),      # the first version served is evaluated (the warm start in a fresh run)
    (4, 0, 5, False),
    (5, 0, 5, True),
    (9, 0, 5, True),         # engines jumped past v5: the version they serve is taken
    (9, 9, 1, False),        # never the same version twice
    (10, 9, 1, True),
])
def test_a_pass_is_due_every_eval_every_versions_of_what_engines_serve(served, last, every, due):
    assert is_due(served, last, every) is due


def test_the_served_version_is_the_one_every_engine_agrees_on():
    assert served_version([3, 3]) == 3
    assert served_version([3, 4]) is None  # an update under way
    assert served_version([]) is None


def test_figures_are_share_exact_mean_reward_and_mean_generated_length():
    figures = summarize([EvalOutcome(1.0, True, 4), EvalOutcome(0.5, False, 8), EvalOutcome(0.0, False, 0),
                         EvalOutcome(1.0, True, 12)])
    assert (figures.accuracy, figures.mean_reward, figures.mean_length, figures.samples) == (0.5, 0.625, 6.0, 4)
    assert summarize([]).samples == 0


def outcome(reward, *versions):
    return EvalOutcome(reward, reward == 1.0, 3, frozenset(versions))


def test_a_pass_that_straddles_an_update_counts_for_the_version_that_generated_most_sessions():
    outcomes = [outcome(1.0, 4), outcome(0.0, 4), outcome(1.0, 5), outcome(1.0, 4, 5), outcome(0.5, 4)]
    version, pinned = pin(outcomes)
    assert version == 4 and [o.reward for o in pinned] == [1.0, 0.0, 0.5]  # never the mixed session
    assert summarize(pinned).samples == 3


def test_no_version_pinned_when_too_few_sessions_share_one():
    assert pin([outcome(1.0, 4), outcome(1.0, 5), outcome(0.0, 4, 5), outcome(0.0, 6)]) is None
    assert pin([outcome(1.0)]) is None  # a session that generated nothing has no version
    assert pin([outcome(1.0, 4), outcome(1.0, 5)]) == (5, [outcome(1.0, 5)])  # a tie goes to the newer

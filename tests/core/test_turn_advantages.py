"""Per-token advantages from per-turn rewards, each rule against numbers worked out by hand."""

import math

import pytest

from seamlessflow.core.turn_advantages import AdvantageRule, TurnRewards, has_signal, returns_to_go, token_advantages

# Two trajectories of one group. A: 6 tokens, turns [0,2) [2,4) [4,6) rewarded 1, 0, 2, session reward 3.
# B: 4 tokens, turns [0,3) [3,4) rewarded 0, 1, session reward 1.
A = TurnRewards(6, 3.0, (2, 4, 6), (1.0, 0.0, 2.0))
B = TurnRewards(4, 1.0, (3, 4), (0.0, 1.0))


def test_returns_to_go_by_hand():
    assert returns_to_go([1.0, 0.0, 5.0], 0.5) == [1.0 + 0.5 * (0.0 + 0.5 * 5.0), 0.0 + 0.5 * 5.0, 5.0]


def test_session_rule_is_grpo_on_the_session_reward():
    # rewards 3 and 1: mean 2, unbiased std sqrt(2)
    out = token_advantages([A, B], [0, 0], AdvantageRule.SESSION, eps=0.0)
    assert out == [[1 / math.sqrt(2)] * 6, [-1 / math.sqrt(2)] * 4]


def test_return_to_go_by_hand():
    # values A: 1, 0, 2+3=5; B: 0, 1+1=2. discount 0.5:
    # G_A = [1 + .5*0 + .25*5, 0 + .5*5, 5] = [2.25, 2.5, 5]; G_B = [0 + .5*2, 2] = [1, 2]
    # baselines per turn index: turn 0 (2.25 + 1)/2 = 1.625, turn 1 (2.5 + 2)/2 = 2.25, turn 2 only A: itself
    out = token_advantages([A, B], [0, 0], AdvantageRule.RETURN_TO_GO, discount=0.5, scale_by_std=False)
    assert out[0] == pytest.approx([0.625, 0.625, 0.25, 0.25, 0.0, 0.0])
    assert out[1] == pytest.approx([-0.625, -0.625, -0.625, -0.25])


def test_return_to_go_scaled_by_the_std_of_each_turns_returns():
    # turn 1's G: 2.5 and 2: std = 0.5 / sqrt(2)
    out = token_advantages([A, B], [0, 0], AdvantageRule.RETURN_TO_GO, discount=0.5, eps=0.0)
    assert out[1][3] == pytest.approx(-0.25 / (0.5 / math.sqrt(2)))


def ten_turns(session_reward: float) -> TurnRewards:
    """Ten one-token turns, each rewarded 0.1 (the issue's example)."""
    return TurnRewards(10, session_reward, tuple(range(1, 11)), (0.1,) * 10)


def test_return_to_go_does_not_penalise_late_turns():
    # G_k = 0.1 * (10 - k) + session reward: 2.0 .. 1.1 for the success, 1.0 .. 0.1 for the failure. Against the
    # mean whole return 1.5 the success's answer turn got 1.1 - 1.5 = -0.4; against each turn's own mean,
    # 0.1 * (10 - k) + 0.5, every turn of the success gets +0.5 and every turn of the failure -0.5.
    success, failure = token_advantages([ten_turns(1.0), ten_turns(0.0)], [0, 0], AdvantageRule.RETURN_TO_GO,
                                        scale_by_std=False)
    assert success == pytest.approx([0.5] * 10)
    assert failure == pytest.approx([-0.5] * 10)
    scaled = token_advantages([ten_turns(1.0), ten_turns(0.0)], [0, 0], AdvantageRule.RETURN_TO_GO, eps=0.0)
    assert scaled[0] == pytest.approx([1 / math.sqrt(2)] * 10)  # each turn's std: 1 / sqrt(2)


def test_per_turn_group_by_hand():
    # turn 0: A 1, B 0 -> mean .5; turn 1: A 0, B 2 -> mean 1; turn 2: only A (5) -> itself, 0
    out = token_advantages([A, B], [0, 0], AdvantageRule.PER_TURN_GROUP, scale_by_std=False)
    assert out == [[0.5, 0.5, -1.0, -1.0, 0.0, 0.0], [-0.5, -0.5, -0.5, 1.0]]
    scaled = token_advantages([A, B], [0, 0], AdvantageRule.PER_TURN_GROUP, eps=0.0)
    assert scaled[0][0] == pytest.approx(0.5 / (1 / math.sqrt(2)))  # turn 0's std: sqrt(0.5)


def test_groups_are_normalised_apart():
    out = token_advantages([A, B, A], [0, 0, 1], AdvantageRule.PER_TURN_GROUP, scale_by_std=False)
    assert out[2] == [0.0] * 6  # alone in its group


def test_without_turn_rewards_and_discount_one_return_to_go_is_the_session_rule_on_equal_turn_counts():
    plain = [TurnRewards(3, 1.0, (1, 3), (0.0, 0.0)), TurnRewards(5, 0.0, (2, 5), (0.0, 0.0)),
             TurnRewards(2, 0.5, (1, 2), (0.0, 0.0))]
    session = token_advantages(plain, [0, 0, 0], AdvantageRule.SESSION)
    to_go = token_advantages(plain, [0, 0, 0], AdvantageRule.RETURN_TO_GO)
    assert [a for row in to_go for a in row] == pytest.approx([a for row in session for a in row])


def test_a_turn_no_other_trajectory_reached_gets_no_credit():
    # session rewards only: 1 in three turns, 0 in one. Turn 0 compares both (mean 0.5); turns 1 and 2 only
    # the success itself, which has no baseline there
    long, short = TurnRewards(3, 1.0, (1, 2, 3), (0.0,) * 3), TurnRewards(1, 0.0)
    out = token_advantages([long, short], [0, 0], AdvantageRule.RETURN_TO_GO, scale_by_std=False)
    assert out == [[0.5, 0.0, 0.0], [-0.5]]


def test_a_group_with_equal_session_rewards_has_signal_only_through_its_turns():
    same = [TurnRewards(4, 1.0, (2, 4), (0.0, 0.0)), TurnRewards(4, 1.0, (2, 4), (1.0, -1.0))]
    assert not has_signal(same, AdvantageRule.SESSION)
    assert has_signal(same, AdvantageRule.PER_TURN_GROUP)


def test_malformed_turns_are_refused():
    with pytest.raises(ValueError):
        TurnRewards(4, 0.0, (2, 4), (1.0,))
    with pytest.raises(ValueError):
        TurnRewards(4, 0.0, (3, 2), (1.0, 1.0))
    with pytest.raises(ValueError):
        token_advantages([A], [0, 1], AdvantageRule.SESSION)

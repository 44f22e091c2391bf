"""The training time share: weighted turns, work-conserving, no credit saved while idle (`core.train_share`)."""

from __future__ import annotations

from seamlessflow.core.train_share import Contender, ShareConfig, TrainShare


def run(share: TrainShare, seconds: int, ready: dict[str, bool], weights: dict[str, float],
        start: int = 0) -> dict[str, int]:
    """Ticks once a second; returns each trainer's ticks holding a turn."""
    held = dict.fromkeys(weights, 0)
    for now in range(start, start + seconds):
        turns = share.step([Contender(rid, weights[rid], ready[rid]) for rid in weights], float(now))
        for rid in turns:
            held[rid] += 1
    return held


def test_busy_trainers_hold_turns_in_proportion_to_their_weights():
    share = TrainShare(ShareConfig(concurrent=1, slice_s=10))
    held = run(share, 3000, {"red": True, "blue": True}, {"red": 3.0, "blue": 1.0})
    assert held["red"] + held["blue"] == 3000  # one turn at a time, never none while work waits
    assert 2.9 < held["red"] / held["blue"] < 3.1
    # turn seconds are charged at the next tick: all but the last tick's
    assert abs(share.held_s["red"] - held["red"]) <= 1 and abs(share.held_s["blue"] - held["blue"]) <= 1


def test_a_turn_lasts_its_slice_then_passes_to_the_least_served():
    share = TrainShare(ShareConfig(concurrent=1, slice_s=5))
    holders = [next(iter(share.step([Contender("a", 1, True), Contender("b", 1, True)], float(t))))
               for t in range(20)]
    assert holders == ["a"] * 5 + ["b"] * 5 + ["a"] * 5 + ["b"] * 5


def test_a_trainer_alone_with_work_holds_every_turn_and_one_without_work_gets_none():
    share = TrainShare(ShareConfig(concurrent=1, slice_s=5))
    held = run(share, 100, {"red": True, "blue": False}, {"red": 1.0, "blue": 4.0})
    assert held == {"red": 100, "blue": 0}


def test_a_turn_ends_early_when_its_trainer_runs_out_of_work():
    share = TrainShare(ShareConfig(concurrent=1, slice_s=60))
    assert share.step([Contender("a", 1, True), Contender("b", 1, True)], 0.0) == {"a"}
    assert share.step([Contender("a", 1, False), Contender("b", 1, True)], 2.0) == {"b"}


def test_a_turn_ends_for_want_of_work_no_sooner_than_the_roles_can_change():
    """Found on `make up-teams`: turns passed back and forth each tick while the roles, held by a 4 s dwell, lagged;
    both trainers were in `train` or both `idle` at times. A turn now lasts the dwell time at least."""
    share = TrainShare(ShareConfig(concurrent=1, slice_s=60, min_turn_s=4))
    assert share.step([Contender("a", 1, True), Contender("b", 1, True)], 0.0) == {"a"}
    assert share.step([Contender("a", 1, False), Contender("b", 1, True)], 2.0) == {"a"}
    assert share.step([Contender("a", 1, False), Contender("b", 1, True)], 4.0) == {"b"}


def test_a_trainer_back_from_idle_saves_no_credit():
    """Blue wanted nothing for 1000 s while red trained: back, blue shares from then on at the weights (1:1), it
    does not hold every turn until it has caught up on those 1000 s."""
    share = TrainShare(ShareConfig(concurrent=1, slice_s=10))
    weights = {"red": 1.0, "blue": 1.0}
    run(share, 1000, {"red": True, "blue": False}, weights)
    held = run(share, 200, {"red": True, "blue": True}, weights, start=1000)
    assert held == {"red": 100, "blue": 100}


def test_a_new_trainer_starts_level_with_the_others():
    share = TrainShare(ShareConfig(concurrent=1, slice_s=10))
    run(share, 500, {"red": True}, {"red": 1.0})
    held = run(share, 200, {"red": True, "blue": True}, {"red": 1.0, "blue": 1.0}, start=500)
    assert held == {"red": 100, "blue": 100}


def test_concurrent_turns_go_to_the_least_served_and_a_gone_trainer_pays_nothing_more():
    share = TrainShare(ShareConfig(concurrent=2, slice_s=10))
    held = run(share, 3000, {"a": True, "b": True, "c": True}, {"a": 2.0, "b": 1.0, "c": 1.0})
    assert sum(held.values()) == 6000
    assert 1.9 < held["a"] / held["b"] < 2.1 and 0.95 < held["b"] / held["c"] < 1.05
    before = dict(share.served)
    assert share.step([Contender("a", 2.0, True)], 3001.0) == {"a"}  # b and c gone: no longer charged
    assert share.served["b"] == before["b"] and share.served["c"] == before["c"]

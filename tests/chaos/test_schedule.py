"""The fault schedule is repeatable, hits every target equally, and recovery is read from record times."""

from collections import Counter

from seamlessflow.chaos.inject import Injected
from seamlessflow.chaos.recovery import recoveries
from seamlessflow.chaos.schedule import FREEZE, KILL, REPLACE, Fault, plan

TARGETS = ["proxy", "assembler", "trainer", "engine-0"]


def test_same_seed_same_schedule_and_every_target_hit_in_turn():
    faults = plan(3, TARGETS, 12, 10.0)
    assert faults == plan(3, TARGETS, 12, 10.0) and faults != plan(4, TARGETS, 12, 10.0)
    hits = Counter(t for f in faults for t in f.targets)
    assert set(hits) == set(TARGETS) and max(hits.values()) - min(hits.values()) <= 1
    assert [len(f.targets) for f in faults][2::3] == [2, 2, 2, 2]  # every third fault is a pair
    assert all(f.action == KILL for f in faults if len(f.targets) == 2)
    assert [f.at_s for f in faults] == sorted(f.at_s for f in faults)


def test_recovery_is_the_slowest_of_calls_trajectories_and_a_new_weight_version():
    kill = Injected(Fault(0.0, ("trainer",)), 10_000, {"trainer": 1})
    freeze = Injected(Fault(5.0, ("proxy",), FREEZE, 4.0), 20_000, {"proxy": 2})
    weights = [(9_000, 3), (12_000, 3), (18_500, 4)]  # at 12 s the restarted trainer re-publishes v3: not progress
    [k, f] = recoveries(
        [kill, freeze], 40_000, acks_ms=[11_000, 25_000], trajectories_ms=[10_500, 30_000], weights=weights
    )
    assert (k.seconds, k.last) == (8.5, "weights")  # v4 at 18.5 s is the last of the three to come back
    assert (f.seconds, f.waited_s, f.last) == (None, 20.0, "weights")  # no new version after the thaw at 24 s


def test_a_fault_struck_before_the_last_was_recovered_from_carries_its_recovery():
    freeze = Injected(Fault(0.0, ("engine-0",), FREEZE, 5.0), 0, {"engine-0": 1})
    kill = Injected(Fault(14.0, ("trainer",)), 14_000, {"trainer": 2})
    late = Injected(Fault(200.0, ("proxy",)), 200_000, {"proxy": 3})
    weights = [(1_000, 1), (60_000, 2)]  # the killed trainer's next version comes at 60 s
    [f, k, p] = recoveries([freeze, kill, late], 300_000, acks_ms=[6_000, 15_000, 201_000],
                           trajectories_ms=[7_000, 16_000, 202_000], weights=weights)
    assert (f.seconds, f.overlapped_by, f.unrecovered_s) == (60.0, kill, 14.0)  # the kill delayed the freeze's
    assert (k.seconds, k.overlapped_by) == (46.0, None)  # judged on its own
    assert (p.seconds, p.overlapped_by) == (None, None)  # no version after it: not overlapped, judged itself


def test_each_single_writer_target_is_frozen_replaced_and_woken_once_at_a_seeded_moment():
    """The zombie faults are extra: with them the kills and freezes are the same as without."""
    plain = plan(3, TARGETS, 12, 10.0)
    faults = plan(3, TARGETS, 12, 10.0, replace=("trainer", "scheduler"))
    assert faults == plan(3, TARGETS, 12, 10.0, replace=("trainer", "scheduler"))
    assert [f for f in faults if f.action != REPLACE] == plain
    [zombie] = [f for f in faults if f.action == REPLACE]
    assert zombie.targets == ("trainer",) and 0.0 <= zombie.at_s <= 110.0
    assert [f.at_s for f in faults] == sorted(f.at_s for f in faults)
    assert zombie != next(f for f in plan(4, TARGETS, 12, 10.0, replace=("trainer",)) if f.action == REPLACE)

"""The autoscaling policy (`core.autoscale`): unit cases for each rule and its reason, and properties: the count
never leaves [min, max], changes respect the cool-down, and a steady load never flaps."""

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seamlessflow.core.autoscale import Autoscaler, CapacitySignals, ScaleDecision, ScalingLimits, decide

LIMITS = ScalingLimits(min_engines=2, max_engines=8, cooldown_s=60.0, down_after_s=180.0)


def waiting(sessions, engines=4, **fields):
    return CapacitySignals(waiting_sessions=sessions, kv_use=(1.0,) * engines, **fields)


def running(kv_use, **fields):
    return CapacitySignals(kv_use=tuple(kv_use), **fields)


def held_since(at, quiet_since=None):
    """A previous decision that changed the count at `at`."""
    return ScaleDecision(0, 4, "earlier", at, changed_at=at, quiet_since=quiet_since)


def test_sessions_waiting_above_the_threshold_grow_by_one():
    decision = decide(waiting(12), engines=4, now=1000.0, limits=LIMITS)
    assert (decision.change, decision.target) == (1, 5)
    assert decision.reason == "3.0 sessions waiting per engine > 2: +1"
    assert decision.changed_at == 1000.0


def test_a_large_backlog_grows_in_proportion_bounded_by_max():
    assert decide(waiting(200), engines=4, now=0.0, limits=LIMITS).change == 4  # ceil(200 / 64)
    at_most = decide(waiting(2000), engines=4, now=0.0, limits=LIMITS)
    assert (at_most.change, at_most.target) == (4, 8)  # 32 asked, 8 the max


def test_at_max_it_holds_and_says_so():
    decision = decide(waiting(100, engines=8), engines=8, now=0.0, limits=LIMITS)
    assert decision.change == 0 and decision.reason.endswith("at max 8")


def test_engines_still_starting_count_against_the_backlog():
    decision = decide(waiting(100, engines_starting=2), engines=4, now=0.0, limits=LIMITS)
    assert decision.change == 0 and "2 engines starting cover it" in decision.reason
    assert decide(waiting(200, engines_starting=2), engines=4, now=0.0, limits=LIMITS).change == 2


def test_a_backlog_under_the_threshold_holds_unless_the_trainer_starves_on_full_engines():
    assert decide(waiting(6), engines=4, now=0.0, limits=LIMITS).change == 0
    starved = decide(waiting(6, trainer_idle=0.8), engines=4, now=0.0, limits=LIMITS)
    assert starved.change == 1
    assert starved.reason == "trainer idle 80% > 50%, engines 100% full, 6 sessions waiting: +1"
    room_left = CapacitySignals(waiting_sessions=6, kv_use=(0.5,) * 4, trainer_idle=0.8)
    assert decide(room_left, engines=4, now=0.0, limits=LIMITS).change == 0  # the engines will take them


def test_a_busy_trainer_with_a_batch_waiting_holds_the_growth():
    signals = waiting(100, trajectories_waiting=1500, batch_threshold=1024, trainer_idle=0.1)
    decision = decide(signals, engines=4, now=0.0, limits=LIMITS)
    assert decision.change == 0
    assert decision.reason == ("25.0 sessions waiting per engine > 2; trainer behind (1.5 batches waiting, "
                               "idle 10%): more engines would not help")


def test_queue_depth_inside_the_engines_is_backlog_too():
    signals = CapacitySignals(queue_depth=(5, 5, 5, 5), kv_use=(1.0,) * 4)
    assert decide(signals, engines=4, now=0.0, limits=LIMITS).change == 1


def test_cool_down_holds_a_change_and_says_how_long():
    decision = decide(waiting(12), engines=4, now=1020.0, last=held_since(1000.0), limits=LIMITS)
    assert decision.change == 0 and decision.reason == "3.0 sessions waiting per engine > 2; cool-down 40 s left"
    assert decision.changed_at == 1000.0  # a hold keeps the time of the last change
    assert decide(waiting(12), engines=4, now=1060.0, last=decision, limits=LIMITS).change == 1


def test_shrink_waits_for_a_quiet_period_then_drains():
    low = running([0.2, 0.2, 0.2, 0.2])  # 0.8 engines' worth of load on 4
    first = decide(low, engines=4, now=0.0, limits=LIMITS)
    assert first.change == 0 and first.quiet_since == 0.0 and "quiet for 0 s of 180" in first.reason
    later = decide(low, engines=4, now=100.0, last=first, limits=LIMITS)
    assert later.change == 0 and later.quiet_since == 0.0
    done = decide(low, engines=4, now=180.0, last=later, limits=LIMITS)
    assert (done.change, done.target) == (-2, 2)  # 0.8 fits on 2 under 60 %; min is 2
    assert done.reason == "load 0.8 engines' worth fits on 2 under 60%: -2"


def test_a_load_that_would_not_fit_on_fewer_engines_never_starts_the_quiet_clock():
    busy = running([0.5, 0.5, 0.5, 0.5])  # 2.0 on 3 engines is 67 % > 60 %
    decision = decide(busy, engines=4, now=500.0, last=held_since(0.0, quiet_since=0.0), limits=LIMITS)
    assert decision.change == 0 and decision.quiet_since is None and "over 60% on 3" in decision.reason


def test_a_backlog_that_asks_for_growth_resets_the_quiet_clock():
    signals = CapacitySignals(waiting_sessions=20, kv_use=(0.0,) * 4)  # 5 per engine, though the caches are empty
    decision = decide(signals, engines=4, now=500.0, last=held_since(0.0, 100.0), limits=LIMITS)
    assert decision.quiet_since is None and decision.change == 1


def test_a_few_sessions_waiting_count_as_load_and_do_not_stop_a_shrink():
    signals = CapacitySignals(waiting_sessions=3, kv_use=(0.1,) * 4)  # 0.4 + 3/64 engines' worth
    decision = decide(signals, engines=4, now=500.0, last=held_since(0.0, 100.0), limits=LIMITS)
    assert (decision.change, decision.reason) == (-2, "load 0.4 engines' worth fits on 2 under 60%: -2")


def test_at_min_it_never_shrinks():
    decision = decide(running([0.0, 0.0]), engines=2, now=1e6, last=held_since(0.0, 0.0), limits=LIMITS)
    assert decision.change == 0 and decision.reason == "load 0.0 engines' worth; at min 2"


def test_a_count_outside_the_limits_is_put_back_at_once_even_in_cool_down():
    below = decide(CapacitySignals(), engines=0, now=10.0, last=held_since(0.0), limits=LIMITS)
    assert (below.change, below.reason) == (2, "below min 2: +2")
    above = decide(CapacitySignals(), engines=11, now=10.0, last=held_since(0.0), limits=LIMITS)
    assert (above.change, above.target) == (-3, 8)


def test_scale_to_zero_and_back():
    limits = ScalingLimits(min_engines=0, max_engines=4, down_after_s=0.0)
    assert decide(running([0.0]), engines=1, now=0.0, limits=limits).change == -1
    assert decide(running([0.3]), engines=1, now=0.0, limits=limits).change == 0
    back = decide(CapacitySignals(waiting_sessions=1), engines=0, now=0.0, limits=limits)
    assert back.change == 1 and back.reason == "1 sessions waiting and no engine: +1"


def test_the_autoscaler_keeps_its_last_decision():
    scaler = Autoscaler(LIMITS)
    assert scaler.step(waiting(12), 4, 0.0).change == 1
    assert scaler.step(waiting(15), 5, 30.0).change == 0  # cool-down
    assert scaler.last is not None and scaler.last.changed_at == 0.0


def test_limits_are_checked():
    with pytest.raises(ValueError, match="min_engines"):
        ScalingLimits(min_engines=5, max_engines=4)
    with pytest.raises(ValueError, match="down_kv_target"):
        ScalingLimits(down_kv_target=1.0)


# properties

limits_strategy = st.builds(
    lambda low, span, cool, after: ScalingLimits(min_engines=low, max_engines=low + span, cooldown_s=cool,
                                                 down_after_s=after),
    st.integers(0, 4), st.integers(0, 12), st.sampled_from([0.0, 30.0, 60.0]), st.sampled_from([0.0, 60.0, 180.0]),
)
signals_strategy = st.builds(
    CapacitySignals,
    waiting_sessions=st.integers(0, 2000),
    kv_use=st.lists(st.floats(0.0, 1.0), max_size=16).map(tuple),
    trajectories_waiting=st.integers(0, 3000),
    batch_threshold=st.integers(1, 1024),
    trainer_idle=st.floats(0.0, 1.0),
    engines_starting=st.integers(0, 4),
)


@settings(max_examples=200, deadline=None)
@given(limits=limits_strategy, start=st.integers(0, 20), readings=st.lists(signals_strategy, min_size=1, max_size=40))
def test_any_signals_keep_the_count_in_bounds_and_respect_the_cool_down(limits, start, readings):
    engines, last, changes = start, None, []
    for tick, signals in enumerate(readings):
        now = 10.0 * tick
        decision = decide(signals, engines, now, last, limits)
        assert decision.target == engines + decision.change
        assert limits.min_engines <= decision.target <= limits.max_engines
        if decision.change:
            changes.append((now, limits.min_engines <= engines <= limits.max_engines))
        engines, last = decision.target, decision
    in_bounds = [at for at, was_inside in changes if was_inside]  # a limit correction ignores the cool-down
    assert all(b - a >= limits.cooldown_s for a, b in zip(in_bounds, in_bounds[1:], strict=False))


def steady(demand, engines, slots, trainer_idle):
    """A steady load of `demand` engines' worth of sessions, served by `engines` of `slots` each."""
    if engines == 0:
        return CapacitySignals(waiting_sessions=math.ceil(demand * slots), trainer_idle=trainer_idle)
    share = min(1.0, demand / engines)
    backlog = max(0, math.ceil((demand - engines) * slots))
    return CapacitySignals(waiting_sessions=backlog, kv_use=(share,) * engines, trainer_idle=trainer_idle)


@settings(max_examples=200, deadline=None)
@given(limits=limits_strategy, demand=st.floats(0.0, 20.0, allow_subnormal=False), idle=st.floats(0.0, 1.0),
       start=st.integers(0, 16))
def test_a_steady_load_never_flaps(limits, demand, idle, start):
    engines, last, directions = start, None, []
    for tick in range(200):
        decision = decide(steady(demand, engines, limits.sessions_per_engine, idle), engines, 5.0 * tick, last, limits)
        if decision.change:
            directions.append(1 if decision.change > 0 else -1)
        engines, last = decision.target, decision
    assert len(set(directions)) <= 1, directions  # only up or only down, never both
    final = steady(demand, engines, limits.sessions_per_engine, idle)
    if limits.min_engines < engines < limits.max_engines:  # settled between the limits: neither rule fires
        assert final.backlog <= limits.up_waiting_per_engine * engines or idle <= limits.trainer_starved

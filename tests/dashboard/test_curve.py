"""A dashboard curve stays within its bound over any number of steps, evenly spread, its newest point kept."""

import pytest

from seamlessflow.dashboard.curve import Curve


def test_a_long_run_keeps_at_most_the_bound_evenly_spread_and_the_newest_point():
    curve = Curve(max_points=64)
    for step in range(100_000):
        curve.add(step, step * 0.5)
        assert len(curve) <= 64
    steps = [s for s, _ in curve.points()]
    assert steps[-1] == 99_999 and curve.points()[-1] == (99_999, 99_999 * 0.5)
    gaps = {b - a for a, b in zip(steps[:-2], steps[1:-1], strict=True)}
    assert gaps == {curve.stride} and steps[0] == 0  # one spacing over the whole run, from its start
    assert len(curve) >= 32  # thinning halves, never empties


def test_a_short_curve_is_kept_whole_and_a_step_plotted_again_is_replaced():
    curve = Curve(max_points=8)
    for step in (3, 1, 2):
        curve.add(step, float(step))
    curve.add(2, 20.0)
    assert curve.points() == [(1, 1.0), (2, 20.0), (3, 3.0)]


def test_an_older_step_arriving_late_does_not_displace_the_newest():
    curve = Curve(max_points=4)
    for step in range(1, 10):
        curve.add(step, float(step))
    curve.add(5, 50.0)  # an overdue eval plotted at an earlier version
    assert curve.points()[-1] == (9, 9.0) and len(curve) <= 4


def test_a_curve_needs_room_for_two_points():
    with pytest.raises(ValueError):
        Curve(max_points=1)

from seamlessflow.core.timeline import Interval, bubble_ratio, exclusive_share, time_by_kind


def test_bubble_ratio_counts_idle_switch_and_unrecorded_gaps():
    intervals = [
        Interval("a", 0.0, 6.0, "rollout"), Interval("a", 6.0, 8.0, "switch"), Interval("a", 8.0, 10.0, "train"),
        Interval("b", 0.0, 5.0, "rollout"),  # nothing recorded for b from 5 to 10
    ]
    assert bubble_ratio(intervals) == 1.0 - 13.0 / 20.0


def test_failed_time_is_left_out_of_the_bubble():
    intervals = [
        Interval("a", 0.0, 10.0, "rollout"),
        Interval("b", 0.0, 4.0, "rollout"),
        Interval("b", 4.0, 10.0, "failed"),
    ]
    assert bubble_ratio(intervals) == 0.0


def test_exclusive_share_is_the_synchronous_rollout_phase():
    intervals = [Interval("a", 0.0, 8.0, "rollout"), Interval("b", 0.0, 4.0, "rollout"),
                 Interval("a", 8.0, 10.0, "train"), Interval("b", 8.0, 10.0, "train")]
    assert exclusive_share(intervals, "rollout") == 0.8
    assert exclusive_share(intervals, "train") == 0.2


def test_time_by_kind_sums_durations():
    intervals = [Interval("gpu000", 0.0, 3.0, "rollout"), Interval("gpu001", 1.0, 3.0, "train"),
                 Interval("gpu001", 3.0, 2.0, "idle")]  # a reversed interval lasts 0 s
    assert time_by_kind(intervals) == {"rollout": 3.0, "train": 2.0, "idle": 0.0}

from seamlessflow.agents.offsets import OffsetTracker


def test_commit_point_moves_only_over_contiguous_finished_offsets():
    tracker = OffsetTracker()
    for offset in (1, 2, 3):
        tracker.started(0, offset)
    tracker.done(0, 2)
    assert tracker.committable() == {}
    tracker.done(0, 1)
    assert tracker.committable() == {0: 3}
    assert tracker.committable() == {}  # nothing moved since
    tracker.done(0, 3)
    assert tracker.committable() == {0: 4}


def test_partitions_are_independent_and_in_flight_counts_unfinished():
    tracker = OffsetTracker()
    tracker.started(0, 1)
    tracker.started(1, 7)
    tracker.done(1, 7)
    assert tracker.in_flight() == 1
    assert tracker.in_flight({1}) == 0
    assert tracker.committable() == {1: 8}


def test_revoked_partition_is_forgotten_and_late_completions_ignored():
    tracker = OffsetTracker()
    tracker.started(0, 1)
    tracker.forget({0})
    tracker.done(0, 1)
    assert tracker.committable() == {}
    assert tracker.in_flight() == 0

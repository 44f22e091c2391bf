"""The one offset tracker: commit points stop below the first unfinished record, per partition."""

from seamlessflow.kafka.offsets import OffsetTracker


def test_commit_point_stops_below_the_first_unfinished_record():
    tracker = OffsetTracker()
    for offset, rid in enumerate(["a", "b", "c", "d"]):
        tracker.seen(0, offset, rid)
    tracker.finish(0, 0)
    tracker.finish(0, 2)
    tracker.finish(0, 3)
    assert tracker.commit_points() == {0: 1}
    assert sorted(tracker.finished_above_commit()) == ["c", "d"]
    tracker.finish(0, 1)
    assert tracker.commit_points() == {0: 4}
    assert tracker.finished_above_commit() == []


def test_moved_reports_only_points_that_moved_since_the_last_commit():
    tracker = OffsetTracker()
    for offset in (1, 2, 3):
        tracker.seen(0, offset)
    tracker.finish(0, 2)
    assert tracker.moved() == {}  # reading began at 1, which is still running
    tracker.finish(0, 1)
    assert tracker.moved() == {0: 3}
    tracker.committed({0: 3})
    assert tracker.moved() == {}
    tracker.finish(0, 3)
    assert tracker.moved() == {0: 4}


def test_partitions_are_independent_and_in_flight_counts_unfinished():
    tracker = OffsetTracker()
    tracker.seen(0, 1)
    tracker.seen(1, 7)
    tracker.finish(1, 7)
    assert tracker.in_flight() == 1
    assert tracker.in_flight({1}) == 0
    assert tracker.moved() == {1: 8}
    assert tracker.commit_points() == {0: 1, 1: 8}


def test_committing_forgets_finished_ids_below_the_points_but_keeps_the_points():
    tracker = OffsetTracker()
    tracker.seen(0, 10, "a")
    tracker.seen(0, 11, "b")
    tracker.seen(1, 5, "c")
    tracker.finish(0, 11)
    tracker.committed(tracker.commit_points())
    assert tracker.finished_above_commit() == ["b"]  # 11 is above the point 10: a restart reads it again
    tracker.finish(0, 10)
    tracker.committed(tracker.commit_points())
    assert tracker.finished_above_commit() == []
    assert tracker.commit_points() == {0: 12, 1: 5}


def test_a_revoked_partition_is_forgotten_and_late_completions_are_ignored():
    tracker = OffsetTracker()
    tracker.seen(0, 1, "a")
    tracker.drop({0})
    tracker.finish(0, 1)
    tracker.committed({0: 2})
    assert tracker.commit_points() == {} and tracker.moved() == {} and tracker.in_flight() == 0


def test_finishing_an_unknown_offset_is_harmless():
    tracker = OffsetTracker()
    tracker.seen(0, 0, "a")
    tracker.finish(0, 7)
    assert tracker.commit_points() == {0: 0}

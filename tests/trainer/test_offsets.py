from seamlessflow.trainer.offsets import OffsetTracker


def test_commit_point_stops_below_the_first_unfinished_record():
    tracker = OffsetTracker()
    for offset, tid in enumerate(["a", "b", "c", "d"]):
        tracker.seen(0, offset, tid)
    tracker.finish(0, 0)
    tracker.finish(0, 2)
    tracker.finish(0, 3)
    assert tracker.commit_points() == {0: 1}
    assert sorted(tracker.finished_above_commit()) == ["c", "d"]
    tracker.finish(0, 1)
    assert tracker.commit_points() == {0: 4}
    assert tracker.finished_above_commit() == []


def test_partitions_are_independent_and_forgetting_keeps_points():
    tracker = OffsetTracker()
    tracker.seen(0, 10, "a")
    tracker.seen(1, 5, "b")
    tracker.finish(0, 10)
    assert tracker.commit_points() == {0: 11, 1: 5}
    tracker.forget_below_commit()
    assert tracker.commit_points() == {0: 11, 1: 5}
    tracker.drop_partition(1)
    assert tracker.commit_points() == {0: 11}


def test_finishing_an_unknown_offset_is_harmless():
    tracker = OffsetTracker()
    tracker.seen(0, 0, "a")
    tracker.finish(0, 7)
    assert tracker.commit_points() == {0: 0}

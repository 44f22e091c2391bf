"""The rollout service's split of the control topic into history (restored from) and live records."""

from seamlessflow.messages import ControlCommand
from seamlessflow.rollout.service import History


def cmd(epoch):
    return ControlCommand(f"c{epoch}", "r0", epoch, "pause", "t", "r", 0)


def test_history_is_complete_at_every_partitions_end_and_later_records_wait():
    history = History({0: 2, 1: 1, 2: 0})  # partition 2 was empty at start
    assert not history.add(0, 0, cmd(1))
    assert not history.add(0, 2, cmd(5))  # past the end: live, kept for after the restore
    assert not history.add(0, 1, None)  # another resource's record still ends the partition
    assert history.add(1, 0, cmd(3))
    assert history.done and history.commands == [cmd(1), cmd(3)] and history.later == [cmd(5)]


def test_a_partition_whose_last_offsets_were_compacted_away_ends_at_its_eof():
    history = History({0: 5})
    assert not history.add(0, 1, cmd(2))
    assert history.at_end(0) and history.done
    assert not history.at_end(0)  # reported once


def test_an_empty_topic_has_no_history():
    assert History({}).done and History({0: 0}).done

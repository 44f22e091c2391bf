"""The accounts of a run: a device lent to the trainer counted once, as the trainer's state; every second in one
account; the bubble as their sum."""

import pytest

from seamlessflow.core.accounting import ACCOUNTS, account, device_intervals, overlay
from seamlessflow.core.timeline import Interval, bubble_ratio


def two_cores() -> tuple[list[Interval], list[Interval]]:
    """rollout-0 on core 0; rollout-1 on core 1, lent to the trainer from 4 s to 10 s; the trainer (unpinned)
    trains 5-8 s and waits for data the rest of its time."""
    engines = [Interval("rollout-0", 0, 8, "rollout"), Interval("rollout-0", 8, 10, "wait-load"),
               Interval("rollout-1", 0, 3, "rollout"), Interval("rollout-1", 3, 4, "switch"),
               Interval("rollout-1", 4, 10, "lent")]
    trainer = [Interval("trainer-0", 0, 5, "wait-data"), Interval("trainer-0", 5, 8, "train"),
               Interval("trainer-0", 8, 10, "wait-data")]
    return engines, trainer


def test_a_lent_engine_takes_the_trainers_state_and_the_trainer_is_no_device_of_its_own():
    engines, trainer = two_cores()
    devices = device_intervals(engines, trainer)
    assert {i.resource_id for i in devices} == {"rollout-0", "rollout-1"}
    assert [i for i in devices if i.resource_id == "rollout-1"] == [
        Interval("rollout-1", 0, 3, "rollout"), Interval("rollout-1", 3, 4, "switch"),
        Interval("rollout-1", 4, 5, "wait-data"), Interval("rollout-1", 5, 8, "train"),
        Interval("rollout-1", 8, 10, "wait-data")]
    books = account(devices)
    assert (books.devices, books.span_s) == (2, 10)
    assert books.seconds == {"rollout": 11, "train": 3, "switch": 1, "sync": 0, "wait-data": 3, "wait-load": 2,
                             "held": 0, "failed": 0}
    assert books.bubble == pytest.approx(6 / 20) == bubble_ratio(devices)  # one arithmetic with the timeline's
    assert sum(books.shares().values()) == pytest.approx(1.0)


def test_a_trainer_with_devices_of_its_own_is_one_and_unreported_lent_time_is_held():
    alone = [Interval("rollout-0", 0, 10, "rollout")]
    trainer = [Interval("trainer-0", 0, 4, "train"), Interval("trainer-0", 4, 10, "wait-data")]
    assert device_intervals(alone, trainer) == [*alone, *trainer]
    lent = [Interval("rollout-1", 0, 10, "lent")]
    assert device_intervals(lent, [Interval("trainer-0", 2, 6, "train")]) == [
        Interval("rollout-1", 0, 2, "held"), Interval("rollout-1", 2, 6, "train"), Interval("rollout-1", 6, 10, "held")]


def test_trainers_taking_turns_show_the_busiest():
    red = [Interval("red", 0, 4, "train"), Interval("red", 4, 10, "held")]
    blue = [Interval("blue", 0, 4, "held"), Interval("blue", 4, 7, "train"), Interval("blue", 7, 10, "wait-data")]
    assert overlay([*red, *blue], "trainer") == [Interval("trainer", 0, 7, "train"),
                                                  Interval("trainer", 7, 10, "wait-data")]


def test_time_nothing_recorded_is_loading_and_an_unknown_kind_is_refused():
    late = [Interval("rollout-0", 0, 10, "rollout"), Interval("rollout-1", 4, 10, "rollout")]
    assert account(late).seconds["sync"] == 4  # rollout-1 was starting, loading its model
    assert account([*late, Interval("rollout-2", 0, 10, "failed")]).bubble == pytest.approx(4 / 20)
    with pytest.raises(ValueError, match="no account"):
        account([Interval("rollout-0", 0, 1, "idle")])
    assert set(ACCOUNTS) >= {"rollout", "train", "switch", "sync", "wait-data", "wait-load", "held", "failed"}


def test_the_printed_lines_name_every_account_with_time_and_the_bubble():
    engines, trainer = two_cores()
    lines = account(device_intervals(engines, trainer)).lines()
    assert [line.split("  ")[1].strip() for line in lines[:-1]] == [
        "generating", "training", "switching", "waiting for data", "waiting for load"]
    assert lines[-1].split() == ["bubble", "30.0%", "(2", "devices", "x", "10", "s)"]


def test_a_long_history_of_trainer_steps_cuts_each_lent_stretch_exactly():
    trainer = [Interval("trainer-0", t, t + 1, "train" if t % 2 else "wait-data") for t in range(1000)]
    lent = [Interval("rollout-1", 100.5, 103.5, "lent"), Interval("rollout-1", 998.0, 1002.0, "lent")]
    devices = device_intervals(lent, trainer)
    assert devices == [Interval("rollout-1", 100.5, 101, "wait-data"), Interval("rollout-1", 101, 102, "train"),
                       Interval("rollout-1", 102, 103, "wait-data"), Interval("rollout-1", 103, 103.5, "train"),
                       Interval("rollout-1", 998, 999, "wait-data"), Interval("rollout-1", 999, 1000, "train"),
                       Interval("rollout-1", 1000, 1002, "held")]

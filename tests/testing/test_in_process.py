"""The in-process stack's teardown: every part stopped, in stage order, even when one fails."""

import pytest

from seamlessflow.testing.in_process import InProcessStack, Stage


def test_parts_stop_callers_first_then_by_stage_and_last_started_first_within_one():
    stopped = []
    with InProcessStack() as stack:
        for name, stage in [("engine", Stage.PROCESSES), ("proxy", Stage.PROXY), ("trainer", Stage.TRAINER),
                            ("agents-1", Stage.CALLERS), ("scheduler", Stage.SCHEDULER), ("agents-2", Stage.CALLERS)]:
            stack.add(lambda name=name: stopped.append(name), stage)
    assert stopped == ["agents-2", "agents-1", "scheduler", "trainer", "proxy", "engine"]


def test_a_part_that_fails_to_stop_does_not_keep_the_others_running():
    stopped = []

    def broken():
        raise RuntimeError("stuck")

    with pytest.raises(RuntimeError, match="stuck"):
        with InProcessStack() as stack:
            stack.add(broken, Stage.CALLERS)
            stack.add(lambda: stopped.append("proxy"), Stage.PROXY)
    assert stopped == ["proxy"]


def test_a_failing_test_reports_its_own_failure_not_the_teardown_s():
    with pytest.raises(ValueError, match="the test's own"):
        with InProcessStack() as stack:
            stack.add(lambda: 1 / 0, Stage.PROXY)
            raise ValueError("the test's own")


def test_the_fixture_stops_what_the_test_started(in_process_stack):
    stopped = []
    in_process_stack.add(lambda: stopped.append(True), Stage.PROXY)
    in_process_stack.close()
    assert stopped == [True]
    in_process_stack.close()  # the fixture's teardown closes again: nothing left to stop
    assert stopped == [True]

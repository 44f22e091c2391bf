"""The one wait helper: what it returns, and how it fails."""

import subprocess
import sys
import time

import pytest

from seamlessflow.testing.waiting import until, wait_until


def test_returns_what_the_condition_found_once_it_holds():
    calls = iter([None, [], [3]])
    assert wait_until(lambda: next(calls), 5, every_s=0.01) == [3]


def test_fails_naming_what_it_waited_for():
    with pytest.raises(AssertionError, match="waited 0 s for the answer"):
        wait_until(lambda: False, 0.05, "the answer", every_s=0.01)


def test_the_words_of_a_failure_may_be_computed_when_it_fails():
    state = {"seen": 0}

    def check():
        state["seen"] += 1
        return False

    with pytest.raises(AssertionError, match=r"seen \d+ times"):
        wait_until(check, 0.05, lambda: f"the answer, seen {state['seen']} times", every_s=0.01)


def test_a_watched_process_that_exits_fails_the_wait_at_once():
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    proc.wait(30)
    began = time.monotonic()
    with pytest.raises(AssertionError, match="exited with 3 while waiting for the engine"):
        wait_until(lambda: False, 60, "the engine", alive=[proc])
    assert time.monotonic() - began < 5


async def test_the_event_loop_form_lets_the_loop_run_between_checks():
    import asyncio

    done = asyncio.Event()
    asyncio.get_running_loop().call_later(0.05, done.set)
    assert await until(done.is_set, 5) is True

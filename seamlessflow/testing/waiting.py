"""One way for a test to wait: poll a condition until it holds, fail with what was awaited when it never does.

Why one helper: tests wait on brokers, threads and processes that take a variable time on a loaded machine;
written ten times, the loops differed in whether a timeout raised or returned, and in what they said when
they gave up. A watched process that exits while the test waits fails the wait at once, with its name,
instead of after the whole timeout.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable, Iterable
from typing import TypeVar

T = TypeVar("T")


Awaited = str | Callable[[], str]  # what a wait is for; a function when the words need the state at failure


def wait_until(condition: Callable[[], T | None], timeout_s: float = 60.0, what: Awaited = "the condition",
               every_s: float = 0.1, alive: Iterable[subprocess.Popen] = ()) -> T:
    """Call `condition` every `every_s` until it returns something truthy, and return that; raise
    AssertionError naming `what` after `timeout_s`, or as soon as a process in `alive` has exited."""
    deadline = time.monotonic() + timeout_s
    watched = list(alive)
    while True:
        result = condition()
        if result:
            return result
        for proc in watched:
            assert proc.poll() is None, f"{proc.args!r} exited with {proc.returncode} while waiting for {_words(what)}"
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {_words(what)}"
        time.sleep(every_s)


async def until(condition: Callable[[], T | None], timeout_s: float = 30.0, what: Awaited = "the condition",
                every_s: float = 0.02) -> T:
    """`wait_until` for a test on an event loop: the loop runs on between the checks."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        assert time.monotonic() < deadline, f"waited {timeout_s:.0f} s for {_words(what)}"
        await asyncio.sleep(every_s)
    return result


def _words(what: Awaited) -> str:
    return what if isinstance(what, str) else what()

"""Environment steps (tool calls, code runs, simulators) off the agent's thread and event loop.

Why: agent pools are the environment pools, and an environment step is user code that may be slow, hang
or crash. Run inline, a blocking step inside an `async def` agent stalls every coroutine on that loop, and a
hung step holds its session forever. `Environment.step` runs the step in a sandboxed child process
(seamlessflow/child_call.py) with a deadline and a memory limit and turns a hang or a crash into an
exception the agent handles like any tool error (or lets it end the session as failed); `astep` awaits the
same call from a thread, so the event loop keeps serving the other sessions meanwhile. `fn` must be a
module-level function (it is pickled to the child).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from seamlessflow.child_call import CRASHED, OK, TIMED_OUT, Limits, call_in_child, start_forkserver


class EnvironmentStepError(RuntimeError):
    """The step raised in its child; the message carries the child's exception and traceback."""


class EnvironmentTimeout(EnvironmentStepError, TimeoutError):
    """The step did not answer within its deadline; its process was killed."""


class EnvironmentCrashed(EnvironmentStepError):
    """The step's process died (a signal, `os._exit`, the memory limit hit in C code)."""


class Environment:
    """Runs steps in child processes; `max_parallel` steps at once per `astep` caller pool."""

    def __init__(self, timeout_s: float = 60.0, memory_mb: int | None = 4096, max_parallel: int = 16,
                 preload: tuple[str, ...] = ()):
        self.limits = Limits(timeout_s, memory_mb)
        self._preload = list(preload)
        self._threads = ThreadPoolExecutor(max_parallel, thread_name_prefix="env-step")
        self._started = False

    def step(self, fn: Callable, *args: Any, timeout_s: float | None = None) -> Any:
        """`fn(*args)` in a child; its return value, or EnvironmentTimeout, EnvironmentCrashed or
        EnvironmentStepError."""
        if not self._started:
            start_forkserver(self._preload)
            self._started = True
        limits = self.limits if timeout_s is None else Limits(timeout_s, self.limits.memory_mb)
        result = call_in_child(fn, args, limits, what=f"environment step {getattr(fn, '__name__', fn)}")
        if result.outcome == OK:
            return result.value
        error = {TIMED_OUT: EnvironmentTimeout, CRASHED: EnvironmentCrashed}.get(result.outcome, EnvironmentStepError)
        raise error(result.error)

    async def astep(self, fn: Callable, *args: Any, timeout_s: float | None = None) -> Any:
        """`step` awaited from a thread: the caller's event loop is never blocked by the environment."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, lambda: self.step(fn, *args, timeout_s=timeout_s))

    def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)

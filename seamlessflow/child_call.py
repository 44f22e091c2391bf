"""One call of user code in a child process, with a time and a memory limit.

Why a process per call: verifiers and environment steps are user code (rule checks, a program's tests, a
tool, a simulator) and may hang, leak, allocate without bound or kill their interpreter. A thread cannot be
stopped; a child can be killed at its deadline, limited with `RLIMIT_AS`, and its death is an outcome, not
the caller's. Children come from a `forkserver` (a clean process started once, before any Kafka client
thread exists in it, with the modules named at `start_forkserver` already imported), so a call costs a
fork, not an interpreter start-up. `fn` and its arguments must be picklable (a module-level function).
"""

from __future__ import annotations

import multiprocessing
import resource
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

OK, RAISED, CRASHED, TIMED_OUT = "ok", "raised", "crashed", "timed_out"


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 30.0
    memory_mb: int | None = 2048  # address-space limit of the child (None: unlimited)


@dataclass(frozen=True)
class ChildResult:
    """`value` when `outcome == "ok"`; else `error` says what happened (the exception and its traceback)."""

    outcome: str
    value: Any = None
    error: str = ""
    elapsed_s: float = 0.0


def _child(fn: Callable, args: tuple, memory_mb: int | None, conn: Any) -> None:
    if memory_mb is not None:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        conn.send((OK, fn(*args), ""))
    except BaseException as exc:  # everything the code does wrong is reported, MemoryError included
        conn.send((RAISED, None, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"))
    finally:
        conn.close()


def _noop() -> None:
    pass


def start_forkserver(modules: list[str]) -> None:
    """Starts the fork server with `modules` imported once and waits until it serves: call it before the
    first timed call (a later call in the same process keeps the first server and its modules)."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([__name__, *modules])
    child = ctx.Process(target=_noop, daemon=True)
    child.start()
    child.join()


def call_in_child(fn: Callable, args: tuple, limits: Limits, what: str = "call") -> ChildResult:
    """Never raises for the callee's sake: a hang is killed at `timeout_s` and reported as `timed_out`."""
    ctx = multiprocessing.get_context("forkserver")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(fn, args, limits.memory_mb, send), daemon=True)
    started = time.monotonic()
    child.start()
    send.close()
    try:
        if receive.poll(limits.timeout_s):
            try:
                outcome, value, error = receive.recv()
            except EOFError:  # died before answering (os._exit, a signal, the memory limit in C code)
                child.join(5)
                return ChildResult(CRASHED, error=f"{what} process died (exit code {child.exitcode})",
                                   elapsed_s=time.monotonic() - started)
            return ChildResult(outcome, value, error, time.monotonic() - started)
        return ChildResult(TIMED_OUT, error=f"{what} did not answer within {limits.timeout_s:g} s",
                           elapsed_s=time.monotonic() - started)
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join(5)

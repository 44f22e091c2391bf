"""Runs one verifier call in a child process with a time and a memory limit.

Why a process per call: a verifier is user code (rule checks, a program's tests, a judge client) and may
hang, leak, allocate without bound or kill its interpreter. A thread cannot be stopped; a child can be
killed at its deadline, limited with `RLIMIT_AS`, and its death is an outcome, not the worker's. Children
come from a `forkserver` (a clean process forked once, before any Kafka client thread exists in it), so a
call costs a fork, not an interpreter start-up.
"""

from __future__ import annotations

import multiprocessing
import resource
import time
import traceback
from dataclasses import dataclass, field
from typing import Any

from seamlessflow.agents.episode import parse_result
from seamlessflow.agents.loader import load_agent
from seamlessflow.rewards.request import ScoreRequest

OK, RAISED, CRASHED, TIMED_OUT = "ok", "raised", "crashed", "timed_out"


@dataclass(frozen=True)
class Verdict:
    """One call's outcome: `reward` and `info` when `outcome == "ok"`, else `error` says what happened."""

    outcome: str
    reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    elapsed_s: float = 0.0


@dataclass(frozen=True)
class Limits:
    timeout_s: float = 30.0
    memory_mb: int | None = 2048  # address-space limit of the child (None: unlimited)


def _child(reference: str, request: ScoreRequest, memory_mb: int | None, conn: Any) -> None:
    if memory_mb is not None:
        limit = memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    try:
        reward, info = parse_result(load_agent(reference)(request))
        conn.send((OK, reward, info, ""))
    except BaseException as exc:  # everything the verifier does wrong is reported, including MemoryError
        conn.send((RAISED, 0.0, {}, f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=3)}"))
    finally:
        conn.close()


def _noop() -> None:
    pass


def start_forkserver(reference: str) -> None:
    """Starts the fork server with this module and the verifier's imported once (a child then costs a fork,
    not seconds of imports), and waits until it serves: call it before the first timed call."""
    module = reference.rpartition(":")[0]
    preload = [__name__] + ([module] if module and not module.endswith(".py") else [])
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(preload)
    child = ctx.Process(target=_noop, daemon=True)
    child.start()
    child.join()


def run_verifier(reference: str, request: ScoreRequest, limits: Limits) -> Verdict:
    """Never raises for the verifier's sake: a hang is killed at `timeout_s` and reported as `timed_out`."""
    ctx = multiprocessing.get_context("forkserver")
    receive, send = ctx.Pipe(duplex=False)
    child = ctx.Process(target=_child, args=(reference, request, limits.memory_mb, send), daemon=True)
    started = time.monotonic()
    child.start()
    send.close()
    try:
        if receive.poll(limits.timeout_s):
            try:
                outcome, reward, info, error = receive.recv()
            except EOFError:  # died before answering (os._exit, a signal, the memory limit in C code)
                child.join(5)
                return Verdict(CRASHED, error=f"verifier process died (exit code {child.exitcode})",
                               elapsed_s=time.monotonic() - started)
            return Verdict(outcome, reward, info, error, time.monotonic() - started)
        return Verdict(TIMED_OUT, error=f"verifier did not answer within {limits.timeout_s:g} s",
                       elapsed_s=time.monotonic() - started)
    finally:
        receive.close()
        if child.is_alive():
            child.kill()
        child.join(5)

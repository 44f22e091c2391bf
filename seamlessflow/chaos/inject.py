"""Delivers a fault to running services by pid: kill -9, SIGSTOP then SIGCONT, or a zombie (`REPLACE`).

A zombie: the service's process group is stopped until the placement's replacement holds the role (the role's
log says so), then woken; by then the broker has fenced it, so it must exit and have written nothing after
its replacement began. That runs on a thread of its own (a trainer's replacement takes a DeepSpeed start),
and what happened goes to `Injected.zombie` for the audit.

Targets are service names as the supervisor knows them (`proxy`, `assembler`, `trainer`, `rollout-0`,
`broker-2`, `agents-default-demo`, ...). `NAME+child` hits one child process of that service instead: a
rollout worker's vLLM engine, or one rank under the trainer's launcher. Pids come from the supervisor's
state file, so the same code serves a stack this run started and one it attached to.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import psutil

from seamlessflow.chaos.audit import Zombie
from seamlessflow.chaos.schedule import FREEZE, REPLACE, Fault
from seamlessflow.stack.processes import pid_alive
from seamlessflow.stack.supervisor import Supervisor

CHILD = "+child"
HOLDS_ROLE = b"holds role"  # what a role's writer logs once its init_transactions fenced the older ones
START_MARK = b"\n--- start "  # the supervisor's line before each process's output in a service's log
REAP_S = 5.0  # how long a replaced process found gone may wait for the supervisor to reap it
Offsets = Callable[[str], dict[int, int]]  # service -> its role's committed offsets (partition -> offset)


class Replacer(Protocol):
    """What a `REPLACE` fault needs of the placement."""

    def replace(self, name: str) -> int:
        """Starts a new process of `name`, leaving the current one; its pid."""

    def holds_role(self, name: str) -> bool:
        """Whether `name`'s current process holds its role."""

    def exit_code(self, pid: int, timeout_s: float) -> tuple[bool, int | None]:
        """(gone, exit code if known) of a replaced process, waiting up to `timeout_s`."""


class SupervisorReplacer:
    """`Replacer` over this machine's supervisor; what a process holds is read from its service's log."""

    def __init__(self, supervisor: Supervisor) -> None:
        self.supervisor = supervisor

    def replace(self, name: str) -> int:
        return self.supervisor.replace(name)

    def holds_role(self, name: str) -> bool:
        log = Path(self.supervisor.states[name].log).read_bytes()
        return HOLDS_ROLE in log[log.rfind(START_MARK):]

    def exit_code(self, pid: int, timeout_s: float) -> tuple[bool, int | None]:
        """The supervisor reaps it (its child: the placement's checks, every half second) and keeps the code;
        one found gone that it has not reaped `REAP_S` later is gone with its code unknown."""
        exits = self.supervisor.replaced_exits
        _until(lambda: pid in exits or not pid_alive(pid), timeout_s)
        _until(lambda: pid in exits, REAP_S if not pid_alive(pid) else 0.0)
        return (True, exits[pid]) if pid in exits else (not pid_alive(pid), None)


@dataclass
class Injected:
    fault: Fault
    at_ms: int  # wall clock when delivered
    pids: dict[str, int | None]  # target -> pid hit (None: the target had no live process then)
    zombie: Zombie | None = None  # REPLACE: what became of the frozen process (set by its thread)
    thread: threading.Thread | None = field(default=None, repr=False)

    @property
    def delivered(self) -> bool:
        return any(pid is not None for pid in self.pids.values())


class Injector:
    def __init__(self, pids: Callable[[], dict[str, int | None]], seed: int = 0, replacer: Replacer | None = None,
                 offsets: Offsets = lambda _name: {}, took_over_s: float = 150.0, exit_s: float = 60.0) -> None:
        """`took_over_s`: longest wait for a replacement to hold its role (a DeepSpeed start on a loaded
        machine); `exit_s`: for the woken process to exit."""
        self.pids = pids  # service name -> pid of its main process, read fresh for every fault
        self._rng = random.Random(seed)
        self.replacer, self.offsets, self.took_over_s, self.exit_s = replacer, offsets, took_over_s, exit_s

    def targets(self) -> list[str]:
        return sorted(name for name, pid in self.pids().items() if pid)

    def deliver(self, fault: Fault) -> Injected:
        now = self.pids()
        hit = {target: self._pid(target, now) for target in fault.targets}
        at_ms = int(time.time() * 1000)
        live = [pid for pid in hit.values() if pid is not None]
        if fault.action == REPLACE:
            return self._zombie(fault, hit, at_ms)
        if fault.action == FREEZE:
            _signal(live, signal.SIGSTOP)
            timer = threading.Timer(fault.hold_s, _signal, (live, signal.SIGCONT))
            timer.daemon = True
            timer.start()
        else:
            _signal(live, signal.SIGKILL)
        return Injected(fault, at_ms, hit)

    def _zombie(self, fault: Fault, hit: dict[str, int | None], at_ms: int) -> Injected:
        """Starts the zombie's thread; with no placement to replace it (an attached stack) nothing is hit."""
        [target] = fault.targets
        if self.replacer is None or hit[target] is None:
            return Injected(fault, at_ms, {target: None})
        injected = Injected(fault, at_ms, hit)
        injected.thread = threading.Thread(target=self._make_zombie, args=(injected, target),
                                           name=f"zombie-{target}", daemon=True)
        injected.thread.start()
        return injected

    def _make_zombie(self, injected: Injected, name: str) -> None:
        """Waits until the service's process holds its role (one still starting would take it back when woken),
        freezes its process group, has it replaced, and wakes it once the replacement holds the role."""
        assert self.replacer is not None
        _until(lambda: self.replacer is not None and self.replacer.holds_role(name), self.took_over_s)
        pid = self.pids().get(name) or injected.pids[name]  # afresh: another fault may have restarted it
        assert pid is not None
        injected.pids[name], writers = pid, _tree(pid)
        _signal_group(pid, signal.SIGSTOP)
        injected.at_ms = int(time.time() * 1000)
        replaced_ms = int(time.time() * 1000)
        self.replacer.replace(name)
        took_over = _until(lambda: self.replacer is not None and self.replacer.holds_role(name), self.took_over_s)
        at_resume = self.offsets(name)
        resumed_ms = int(time.time() * 1000)
        _signal_group(pid, signal.SIGCONT)
        exited, code = self.replacer.exit_code(pid, self.exit_s)
        injected.zombie = Zombie(name, writers, replaced_ms, resumed_ms, took_over, exited, code, at_resume,
                                 self.offsets(name))

    def join(self, injected: list[Injected], timeout_s: float) -> None:
        """Waits for the zombies' threads: the audit needs what became of them."""
        deadline = time.monotonic() + timeout_s
        for item in injected:
            if item.thread is not None:
                item.thread.join(max(deadline - time.monotonic(), 0.0))

    def _pid(self, target: str, pids: dict[str, int | None]) -> int | None:
        name, child = (target[: -len(CHILD)], True) if target.endswith(CHILD) else (target, False)
        pid = pids.get(name)
        if not pid or not child:
            return pid
        try:
            children = psutil.Process(pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return None
        return self._rng.choice(children).pid if children else None


def _until(condition: Callable[[], bool], timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


def _tree(pid: int) -> tuple[str, ...]:
    """Writer names (`host:pid`, as the role's header has them) of `pid` and every process below it."""
    try:
        pids = [pid] + [child.pid for child in psutil.Process(pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        pids = [pid]
    return tuple(f"{socket.gethostname()}:{p}" for p in pids)


def _signal_group(pid: int, sig: int) -> None:
    """The service's whole process group (its own session): a launcher's ranks freeze and wake with it."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        _signal([pid], sig)


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

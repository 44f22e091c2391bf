"""Delivers a fault to running services by pid: kill -9, or SIGSTOP then SIGCONT.

Targets are service names as the supervisor knows them (`proxy`, `assembler`, `trainer`, `rollout-0`,
`broker-2`, `agents-default-demo`, ...). `NAME+child` hits one child process of that service instead: a
rollout worker's vLLM engine, or one rank under the trainer's launcher. Pids come from the supervisor's
state file, so the same code serves a stack this run started and one it attached to.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import psutil

from seamlessflow.chaos.schedule import FREEZE, Fault

CHILD = "+child"


@dataclass
class Injected:
    fault: Fault
    at_ms: int  # wall clock when delivered
    pids: dict[str, int | None]  # target -> pid hit (None: the target had no live process then)

    @property
    def delivered(self) -> bool:
        return any(pid is not None for pid in self.pids.values())


class Injector:
    def __init__(self, pids: Callable[[], dict[str, int | None]], seed: int = 0):
        self.pids = pids  # service name -> pid of its main process, read fresh for every fault
        self._rng = random.Random(seed)

    def targets(self) -> list[str]:
        return sorted(name for name, pid in self.pids().items() if pid)

    def deliver(self, fault: Fault) -> Injected:
        now = self.pids()
        hit = {target: self._pid(target, now) for target in fault.targets}
        at_ms = int(time.time() * 1000)
        live = [pid for pid in hit.values() if pid is not None]
        if fault.action == FREEZE:
            _signal(live, signal.SIGSTOP)
            timer = threading.Timer(fault.hold_s, _signal, (live, signal.SIGCONT))
            timer.daemon = True
            timer.start()
        else:
            _signal(live, signal.SIGKILL)
        return Injected(fault, at_ms, hit)

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


def _signal(pids: list[int], sig: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass

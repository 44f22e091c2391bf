"""The stack's processes as the operating system sees them: alive or not, found by the marker every one of
them carries, stopped with everything below them, and watched when another supervisor started them.

Below the supervisor (`supervisor.py`), which decides what runs; `down`, `status` and the chaos run use these
from other processes too.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import time
from pathlib import Path

import psutil

PR_SET_CHILD_SUBREAPER = 36
STACK_ENV = "SEAMLESSFLOW_STACK"  # every process of a stack carries its run directory (see `stack_processes`)


def pid_alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:  # a zombie child counts as dead
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


class Adopted:
    """A service process that an earlier supervisor of this run directory started, watched by this one. It is
    not our child: it is followed by pid (psutil's handle checks the pid's start time, so a reused pid is not
    taken for it), and its exit status cannot be known (init reaps it), so `returncode` stays None."""

    returncode: int | None = None

    def __init__(self, proc: psutil.Process):
        self.pid, self._proc = proc.pid, proc

    @classmethod
    def find(cls, recorded: dict, marker: str) -> Adopted | None:
        """The recorded service's process if it still runs: the recorded pid, carrying this stack's marker, and
        created when that service was started (not later: a pid reused after it ended)."""
        try:
            proc = psutil.Process(recorded["pid"])
            started = float(recorded["started_at"])
            if proc.environ().get(STACK_ENV) != marker or not started - 60 <= proc.create_time() <= started + 1:
                return None
        except (psutil.Error, KeyError, TypeError, ValueError, OSError):
            return None
        return cls(proc) if pid_alive(proc.pid) else None

    def running(self) -> bool:
        try:
            return self._proc.is_running() and self._proc.status() != psutil.STATUS_ZOMBIE
        except psutil.Error:
            return False

    def wait(self, timeout: float = 5.0) -> None:
        psutil.wait_procs([self._proc], timeout=timeout)


def running(proc: subprocess.Popen | Adopted) -> bool:
    """Whether a service's main process still runs, whether this supervisor started it or adopted it."""
    return proc.running() if isinstance(proc, Adopted) else proc.poll() is None


def become_subreaper() -> None:
    """Orphans of our services (a vLLM server whose worker died) become our children, not init's, so
    `stop_all` can still find and stop them."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except OSError:
        pass


def stop_tree(pid: int, grace_s: float) -> None:
    """SIGTERM `pid`, its process group and every descendant (some start their own sessions), then
    SIGKILL whatever is left after `grace_s`."""
    try:
        procs = [psutil.Process(pid)]
        procs += procs[0].children(recursive=True)
    except psutil.NoSuchProcess:
        return
    signal_all(procs, pid, signal.SIGTERM)
    _gone, alive = psutil.wait_procs(procs, timeout=grace_s)
    signal_all(alive, pid, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=5)


def stop_service(pid: int, grace_s: float) -> None:
    """SIGTERM a service's own process first, so that it stops its children in its own order (a rollout worker
    takes its engine out of routing at the proxies before the engine stops: `RolloutWorker.retire`); once it
    has exited or `grace_s` has passed, SIGTERM and then SIGKILL every descendant seen meanwhile. Why not
    `stop_tree`: its SIGTERM reached the engine as soon as the worker, whose weight load then failed and
    started a new engine that no snapshot had listed, left running after the worker was gone."""
    try:
        root = psutil.Process(pid)
        seen = {p.pid: p for p in [root, *root.children(recursive=True)]}
        root.send_signal(signal.SIGTERM)
    except psutil.NoSuchProcess:
        return
    deadline = time.monotonic() + grace_s
    while True:
        seen.update((p.pid, p) for p in _descendants(root))
        if not _running(root) or time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    left = [p for p in seen.values() if _running(p)]
    signal_all(left, pid, signal.SIGTERM)
    _gone, alive = psutil.wait_procs(left, timeout=5)
    signal_all(alive, pid, signal.SIGKILL)
    psutil.wait_procs(alive, timeout=5)


def _descendants(proc: psutil.Process) -> list[psutil.Process]:
    try:
        return proc.children(recursive=True)
    except psutil.Error:
        return []


def _running(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def signal_all(procs: list, group: int, sig: int) -> None:
    """`sig` to the process group `group` and to each of `procs` (some start sessions of their own)."""
    try:
        os.killpg(group, sig)
    except (ProcessLookupError, PermissionError):
        pass
    for proc in procs:
        try:
            proc.send_signal(sig)
        except psutil.NoSuchProcess:
            pass


def stop_descendants(grace_s: float, spare: frozenset[tuple[int, float]] = frozenset()) -> None:
    """Stops every process still below this one (orphans adopted as subreaper included), except the
    children in `spare` ((pid, create time) pairs): what the host process ran before a supervisor started
    (a test process's own broker, say) is not the supervisor's to stop."""
    for child in psutil.Process().children():
        try:
            if (child.pid, child.create_time()) not in spare:
                stop_tree(child.pid, grace_s)
        except psutil.NoSuchProcess:
            pass


def stack_processes(run_dir: Path) -> list[psutil.Process]:
    """Every process started for the stack of `run_dir` (by its supervisor or below it), wherever it was
    re-parented: they inherit `SEAMLESSFLOW_STACK`, and each service leads a session of its own. A process
    that renamed itself (vLLM's `VLLM::EngineCore`, through setproctitle) has its environment cleared, so it
    is found by its session: one that a marked process leads (the supervisor starts each service as a session
    leader; a shell's session, which a foreground supervisor shares, is not). A kill -9 of the stack by this
    list left such an engine running alone, unfound, for the rest of a test run."""
    marker = str(run_dir.resolve())
    marked, sessions = [], {}
    for proc in psutil.process_iter():
        try:
            if proc.pid == os.getpid():
                continue
            sessions[proc.pid] = os.getsid(proc.pid)
            if proc.environ().get(STACK_ENV) == marker:
                marked.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess, OSError):
            pass
    ours = {p.pid for p in marked if sessions.get(p.pid) == p.pid}  # sessions a stack's process leads
    found = {p.pid: p for p in marked}
    for pid, sid in sessions.items():
        if sid in ours and pid not in found:
            try:
                found[pid] = psutil.Process(pid)
            except psutil.NoSuchProcess:
                pass
    return list(found.values())


def current_children() -> frozenset[tuple[int, float]]:
    found = set()
    for child in psutil.Process().children():
        try:
            found.add((child.pid, child.create_time()))
        except psutil.NoSuchProcess:
            pass
    return frozenset(found)

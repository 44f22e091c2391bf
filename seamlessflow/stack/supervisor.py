"""Runs the stack's processes, restarts crashed ones with backoff, and records their state on disk.

Each child gets its own process group, so stopping a service also stops whatever it started (a vLLM server
under a rollout worker). Stopping escalates from SIGTERM to SIGKILL after a grace period: a process stuck in a
C call (a librdkafka flush, an engine) can outlast SIGTERM. `state.json` lets `seamlessflow status` and `down`
work from another process; a child is listed there before anything waits on it, and every process of the stack
carries `SEAMLESSFLOW_STACK=<run dir>` in its environment, so `down` finds what a killed supervisor never
listed (an engine re-parented to init, say) and stops it too.

A supervisor killed with -9 (the OOM killer, a lost session) leaves its services running; the next `up` adopts
them (`stack/adoption.py` says when): given the dead one's records, this supervisor watches each live one by pid
(`Adopted`: not its child, so no exit status) and restarts it from its spec like any other once it exits.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import psutil

from seamlessflow.exit_codes import FENCED_EXIT_CODE
from seamlessflow.stack.processes import (
    STACK_ENV,
    Adopted,
    become_subreaper,
    current_children,
    running,
    signal_all,
    stack_processes,
    stop_descendants,
    stop_service,
    stop_tree,
)
from seamlessflow.stack.resources import Resources, RestartPolicy

MAX_BACKOFF_S = 30.0
HEALTHY_AFTER_S = 60.0  # a process that ran this long has its backoff reset
SAY_WAITING_EVERY_S = 30.0

# A readiness check: what the service is still waiting for, in words ("" once it is ready). A real check (a
# client call), polled after start; the words go to the status and the log, so a wait that cannot end says why.
Awaiting = Callable[[], str]


@dataclass
class ServiceSpec:
    """One service of the stack, whatever places it. `role` is what it runs (`services.<role>`, or `broker`);
    `resources`, `replicas` and `restart` are a placement's to honour: this supervisor has one machine and
    restarts always, so it uses none of them (replicas are expanded before they reach it)."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)
    ready: Awaiting | None = None
    ready_timeout_s: float = 120.0
    role: str = ""
    resources: Resources = field(default_factory=Resources)
    replicas: int = 1
    restart: RestartPolicy = field(default_factory=RestartPolicy)
    # members on distinct nodes that only work together (a multi-node trainer: one launcher per node), placed
    # all or none by a placement that spans nodes; on one machine this process is one member (`node_rank`)
    gang: int = 1


@dataclass
class ServiceState:
    name: str
    pid: int | None = None
    state: str = "pending"  # pending | starting | running | backoff | stopped | failed
    restarts: int = 0
    started_at: float | None = None
    exit_code: int | None = None
    log: str = ""
    waiting_for: str = ""  # while starting: what its readiness check still waits for
    host: str = ""  # where it runs: the machine's name, and its address in the cluster (a Ray node's IP)
    node_ip: str = ""


class StartupFailed(RuntimeError):
    pass


class NoNodeJoined(StartupFailed):
    """A service that waited for a node to join the cluster (`cluster.autoscaler`), and none did: it never ran,
    and its placement removed it."""


def await_ready(spec: ServiceSpec, state: ServiceState, awaited: Awaiting, say: Callable[[str], object],
                on_change: Callable[[], object] = lambda: None, where: str = "") -> None:
    """One readiness wait for every placement: `awaited()` says what the service still waits for ("" once
    ready; it raises StartupFailed when the start cannot finish). What it waits for goes to the state when it
    changes (`on_change` records it) and to the log every `SAY_WAITING_EVERY_S`, so a start that cannot finish
    says why; past the spec's timeout the start fails (`where` points at the service's log)."""
    started = said = time.monotonic()
    while waiting_for := awaited():
        if waiting_for != state.waiting_for:
            state.waiting_for = waiting_for
            on_change()
        now = time.monotonic()
        if now - started > spec.ready_timeout_s:
            raise StartupFailed(f"{spec.name} not ready after {spec.ready_timeout_s:.0f} s, still waiting for "
                                f"{waiting_for}{where}")
        if now - said >= SAY_WAITING_EVERY_S:
            say(f"{spec.name}: waiting {now - started:.0f} s for {waiting_for}")
            said = now
        time.sleep(0.25)
    state.state, state.waiting_for = "running", ""


class Supervisor:
    shares_disk = True  # the services read this machine's data_dir

    def __init__(self, run_dir: Path, log_dir: Path, grace_s: float = 10.0, say: Callable[[str], None] = print,
                 adopt: dict[str, dict] | None = None):
        """`adopt`: the services a dead supervisor of `run_dir` recorded (`state.json`); each still running is
        this one's from now on, and listed at once (a `down` meanwhile stops it too)."""
        self.run_dir, self.log_dir, self.grace_s, self.say = run_dir, log_dir, grace_s, say
        self.specs: dict[str, ServiceSpec] = {}
        self.states: dict[str, ServiceState] = {}
        self._procs: dict[str, subprocess.Popen | Adopted] = {}
        self._next_start: dict[str, float] = {}
        # processes `replace` left running (frozen, say): no longer the service's, still ours to log and stop
        self.replaced: dict[str, list[subprocess.Popen | Adopted]] = {}
        self.replaced_exits: dict[int, int | None] = {}  # pid of a replaced process -> its exit code, once gone
        self._created: dict[int, float] = {}  # pid of a process we spawned -> its start time, as psutil reads it
        self._lock = threading.RLock()  # `replace` comes from another thread than `check` (the chaos run's)
        self.info: dict[str, str] = {}
        self.ready = False
        self.stopping = False
        self.preexisting = current_children()  # not ours to stop (empty under `up`)
        run_dir.mkdir(parents=True, exist_ok=True)
        log_dir.mkdir(parents=True, exist_ok=True)
        become_subreaper()
        self._adopt(adopt or {})
        self.write_state()  # `down` can find this supervisor from its first moment

    def _adopt(self, recorded: dict[str, dict]) -> None:
        """Takes over the recorded services that still run; a spec of the same name claims each (`start`).
        What carries the stack's marker outside them is stopped: nobody would watch or stop it."""
        marker = str(self.run_dir.resolve())
        known = {f.name for f in fields(ServiceState)}
        for name, svc in recorded.items():
            if proc := Adopted.find(svc, marker):
                self._procs[name] = proc
                self.states[name] = ServiceState(**{k: v for k, v in svc.items() if k in known})
        if recorded:
            self._stop_strays()

    def _stop_strays(self) -> None:
        """Stops every process of the stack that is neither below this supervisor nor below a service it
        adopted: what a dead supervisor left (an engine whose worker died, re-parented to init)."""
        roots = {os.getpid()} | {proc.pid for proc in self._procs.values() if running(proc)}
        for proc in stack_processes(self.run_dir):
            try:
                lineage = {proc.pid} | {parent.pid for parent in proc.parents()}
            except psutil.Error:
                continue
            if not lineage & roots:
                self.say(f"stopping pid {proc.pid}: a process of the stack that no service holds")
                stop_tree(proc.pid, self.grace_s)

    @property
    def state_path(self) -> Path:
        return self.run_dir / "state.json"

    def check_all(self, specs: list[ServiceSpec]) -> None:
        """Nothing to check: one machine, and requests are not enforced here (`Placement`)."""

    def start(self, spec: ServiceSpec) -> None:
        """Starts one service (or claims the adopted one of its name) and waits for its readiness check, if it
        has one."""
        self.specs[spec.name] = spec
        adopted = self._procs.get(spec.name)
        if isinstance(adopted, Adopted) and adopted.running():
            self.say(f"{spec.name}: adopted, pid {adopted.pid}")
        else:
            if isinstance(adopted, Adopted):
                self._stop_strays()  # it died since it was adopted: what it ran was re-parented to init
            self.states[spec.name] = ServiceState(spec.name, log=str(self.log_dir / f"{spec.name}.log"),
                                                  host=socket.gethostname(), node_ip="127.0.0.1")
            self._spawn(spec.name)
        self.write_state()  # listed before any wait: a `down` during the start stops it too
        if spec.ready:
            self._wait_ready(spec)
        self.write_state()

    def _spawn(self, name: str) -> None:
        spec, state = self.specs[name], self.states[name]
        log = open(state.log, "ab", buffering=0)
        log.write(f"\n--- start {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(spec.argv)}\n".encode())
        proc = subprocess.Popen(
            spec.argv, env={**os.environ, **spec.env, STACK_ENV: str(self.run_dir.resolve())}, stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, start_new_session=True,
        )
        log.close()
        self._procs[name] = proc
        try:
            self._created[proc.pid] = psutil.Process(proc.pid).create_time()
        except psutil.Error:
            pass
        state.pid, state.state, state.started_at, state.exit_code = proc.pid, "running", time.time(), None

    def _wait_ready(self, spec: ServiceSpec) -> None:
        """The readiness check, polled until it passes; a process that exits meanwhile fails the start."""
        state = self.states[spec.name]
        state.state = "starting"
        awaiting = spec.ready
        assert awaiting is not None  # only called for a spec with a ready check

        def still_awaited() -> str:
            proc = self._procs[spec.name]
            if not running(proc):
                raise StartupFailed(f"{spec.name} exited with {proc.returncode}; see {state.log}")
            return awaiting()

        await_ready(spec, state, still_awaited, self.say, self.write_state, f"; see {state.log}")

    def replace(self, name: str) -> int:
        """Starts a fresh process of `name` from its spec and leaves the current one running, as a placement
        does for a process it believes dead but that is only frozen or cut off (the chaos run's zombie fault).
        The old one is not the service's any more: its exit is logged, not restarted (`_reap_replaced`), and
        `stop`/`stop_all` still end it. Returns the new pid."""
        with self._lock:
            old = self._procs.pop(name)
            self.replaced.setdefault(name, []).append(old)
            self._spawn(name)
            self.say(f"{name}: pid {old.pid} replaced by pid {self.states[name].pid} (the old one left running)")
            self.write_state()
            return self._procs[name].pid

    def _reap_replaced(self) -> None:
        """Logs the exit of each replaced process; none is restarted: its service has a newer process."""
        for name, procs in list(self.replaced.items()):
            for proc in [p for p in procs if not running(p)]:
                procs.remove(proc)
                self.replaced_exits[proc.pid] = proc.returncode
                why = " (fenced: its replacement holds the role)" if proc.returncode == FENCED_EXIT_CODE else ""
                self.say(f"{name}: replaced pid {proc.pid} exited with {proc.returncode}{why}; not restarted")

    def _newer_holder(self, name: str, proc: subprocess.Popen | Adopted) -> psutil.Process | None:
        """A process of the stack running the same command as `name`, started after `proc`: the one that
        fenced it (a placement elsewhere started it, believing `proc` dead). Start times by the kernel's clock
        (`_created`), as psutil reads them: `started_at`, by ours, can be a second apart."""
        spec, since = self.specs[name], self._created.get(proc.pid, 0.0)
        for other in stack_processes(self.run_dir):
            try:
                if (other.pid != proc.pid and other.cmdline() == spec.argv and other.create_time() >= since
                        and other.status() != psutil.STATUS_ZOMBIE):
                    return other
            except psutil.Error:
                continue
        return None

    def _fenced_by_newer(self, name: str, proc: subprocess.Popen | Adopted) -> bool:
        """A service that exited fenced while a newer process of it runs is that process's zombie: restarting
        it would fence the newer one in turn (ping-pong). The newer one is watched in its place instead.
        Fenced with none newer (the broker timed out its transaction while it was frozen): restarted."""
        if proc.returncode != FENCED_EXIT_CODE or not (newer := self._newer_holder(name, proc)):
            return False
        self.say(f"{name}: pid {proc.pid} exited fenced (code {FENCED_EXIT_CODE}): pid {newer.pid}, newer, holds "
                 "its role; not restarted, watching that one")
        self._procs[name] = Adopted(newer)
        state = self.states[name]
        state.pid, state.started_at, state.exit_code = newer.pid, newer.create_time(), FENCED_EXIT_CODE
        return True

    def check(self) -> None:
        """Restarts exited services, with exponential backoff; call this periodically. An adopted service that
        no spec claimed is stopped once the stack is ready."""
        with self._lock:
            self._check()

    def _check(self) -> None:
        now = time.monotonic()
        self._reap_replaced()
        for name, proc in list(self._procs.items()):
            if name not in self.specs:
                if self.ready and not self.stopping:
                    self.stop(name)
                continue
            state = self.states[name]
            if running(proc) or self.stopping:
                continue
            if isinstance(proc, Adopted) and state.state != "backoff":
                self._stop_strays()  # what it ran (its engine) was re-parented to init, not to us
            if state.state == "running" and self._fenced_by_newer(name, proc):
                continue
            if state.state == "running":
                ran_s = time.time() - (state.started_at or time.time())
                state.exit_code, state.state = proc.returncode, "backoff"
                state.restarts = 0 if ran_s > HEALTHY_AFTER_S else state.restarts
                self._next_start[name] = now + min(MAX_BACKOFF_S, 2.0 ** state.restarts)
            elif state.state == "backoff" and now >= self._next_start[name]:
                state.restarts += 1
                self._spawn(name)
        self.write_state()

    def stop(self, name: str, grace_s: float | None = None) -> None:
        """Stops one service for good (it is not restarted): e.g. the load generators before a drain. `grace_s`:
        how long it may take after SIGTERM (None: the stack's grace), e.g. an agent worker's revoke grace."""
        proc = self._procs.pop(name, None)
        if proc is not None:
            stop_service(proc.pid, self.grace_s if grace_s is None else grace_s)
            proc.wait()
        self._stop_replaced(name)
        self.states[name].state, self.states[name].pid = "stopped", None
        self.write_state()

    def stop_all(self) -> None:
        """Stops services in reverse start order (the broker last)."""
        self.stopping = True
        for name in reversed(list(self._procs)):
            stop_service(self._procs[name].pid, self.grace_s)
            self._procs[name].wait()
            self.states[name].state, self.states[name].pid = "stopped", None
        for name in list(self.replaced):
            self._stop_replaced(name)
        stop_descendants(self.grace_s, self.preexisting)
        self.write_state()

    def _stop_replaced(self, name: str) -> None:
        """Ends the processes `replace` left running for `name`, woken first: a stopped process would sit out
        the SIGTERM grace."""
        for proc in self.replaced.pop(name, []):
            signal_all([], proc.pid, signal.SIGCONT)
            stop_tree(proc.pid, self.grace_s)
            proc.wait()
            self.replaced_exits[proc.pid] = proc.returncode

    def write_state(self) -> None:
        data = {
            "supervisor_pid": os.getpid(),
            "ready": self.ready,
            "stopping": self.stopping,
            "info": self.info,
            "services": {name: asdict(state) for name, state in self.states.items()},
        }
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.state_path)


def read_state(run_dir: Path) -> dict | None:
    try:
        return json.loads((run_dir / "state.json").read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None

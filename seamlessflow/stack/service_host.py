"""The Ray actor that owns one service's process on whatever node Ray placed it: `RayPlacement` starts one per
service (named, detached, in the stack's namespace).

Why an actor around a process, not the service as an actor: a service is `python -m services.<role> --config
FILE`, the same command the local supervisor runs, so nothing of a service changes with its placement. The actor
gets the effective config as text (no shared file system is assumed) and writes it, with `data_dir` set to a
directory of this node's own, before it starts the process. A process that exits is started again here, with
backoff, up to the restart policy; a dead actor (its node lost, its worker killed) is Ray's to restart
(`max_restarts`), and a restarted actor starts its process afresh. The process is started with a parent-death
signal, so it does not outlive its actor.

A process that exits fenced (`FENCED_EXIT_CODE`: the broker gave its role to a newer writer) is started again
only while Ray still counts this node alive (`node_counted_alive`). A node that Ray lost (cut off from the head)
while its processes ran on is one whose actors Ray restarted elsewhere: the replacement fenced ours, and starting
ours again would fence the replacement in turn. On a node Ray still counts, no one replaced the actor, so the
fencing was the broker aborting a transaction left open too long (a long pause): start again, as the local
supervisor does when no newer holder runs.
"""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from seamlessflow.exit_codes import FENCED_EXIT_CODE
from seamlessflow.ports import NODE_ADDRESS_ENV, interface_of
from seamlessflow.stack.processes import STACK_ENV, stop_service
from seamlessflow.stack.supervisor import HEALTHY_AFTER_S

PR_SET_PDEATHSIG = 1
GLOO_INTERFACE_ENV = "GLOO_SOCKET_IFNAME"


def _die_with_parent() -> None:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def node_command(argv: list[str], config: Path | None) -> list[str]:
    """The driver's command for this node: this node's Python for the driver's, and the node-local config."""
    argv = list(argv)
    if argv and Path(argv[0]).name.startswith("python"):
        argv[0] = sys.executable
    if config is not None and "--config" in argv:
        argv[argv.index("--config") + 1] = str(config)
    return argv


class ServiceHost:
    """Starts, watches and restarts one service process; answers where it runs and in what state."""

    def __init__(self, name: str, argv: list[str], env: dict[str, str], config_yaml: str | None, node_dir: str,
                 max_restarts: int = -1, max_backoff_s: float = 30.0, ready: Any = None):
        import ray

        self.name, self.env, self.ready = name, env, ready
        self.max_restarts, self.max_backoff_s = max_restarts, max_backoff_s
        self.node_id = ray.get_runtime_context().get_node_id()
        self.node_ip = ray.util.get_node_ip_address()
        self.dir = Path(node_dir) / self.node_id[:12]
        self.argv = node_command(argv, self._write_config(config_yaml))
        self.log = self.dir / "logs" / f"{name}.log"
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.proc: subprocess.Popen | None = None
        self.state, self.restarts, self.started_at = "starting", 0, 0.0
        self.exit_code: int | None = None
        self.stopping = threading.Event()
        self.spawned = threading.Event()
        # the process is started by this long-lived thread: the parent-death signal follows the thread
        threading.Thread(target=self._watch, name=f"watch-{name}", daemon=True).start()
        self.spawned.wait(30)

    def _write_config(self, config_yaml: str | None) -> Path | None:
        if config_yaml is None:
            return None
        data = yaml.safe_load(config_yaml) or {}
        data["data_dir"] = str(self.dir / "data")
        path = self.dir / "run" / f"{self.name}.yaml"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        return path

    def _spawn(self) -> None:
        with open(self.log, "ab", buffering=0) as log:
            log.write(f"\n--- start {time.strftime('%Y-%m-%d %H:%M:%S')}: {' '.join(self.argv)}\n".encode())
            self.proc = subprocess.Popen(self.argv, env=self._environment(),
                                         stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=_die_with_parent)
        self.state, self.started_at, self.exit_code = "running", time.time(), None

    def _environment(self) -> dict[str, str]:
        """The service's environment: where its stack's files are, and the address other nodes reach it at
        (what it announces for a server it binds to every address: `ports.reachable_host`). gloo (a trainer
        group's, a weight transfer's) is told the interface of that address unless the user chose one: left
        alone it binds where the host name resolves, loopback on many machines, and peers on other nodes then
        never connect."""
        env = {**os.environ, **self.env, STACK_ENV: str(self.dir), NODE_ADDRESS_ENV: self.node_ip}
        interface = interface_of(self.node_ip)
        if interface and GLOO_INTERFACE_ENV not in env:
            env[GLOO_INTERFACE_ENV] = interface
        return env

    def _watch(self) -> None:
        try:
            self._spawn()
        except OSError as exc:  # no such program, say: a failed service, not a start that never ends
            with open(self.log, "a") as log:
                log.write(f"cannot start {self.argv[0]}: {exc}\n")
            self.state = "failed"
            return
        finally:
            self.spawned.set()
        while not self.stopping.is_set():
            assert self.proc is not None
            self.exit_code = self.proc.wait()
            if self.stopping.is_set():
                break
            if time.time() - self.started_at > HEALTHY_AFTER_S:
                self.restarts = 0
            if self.exit_code == FENCED_EXIT_CODE and not self.restart_fenced():
                self.state = "fenced"
                return
            if 0 <= self.max_restarts <= self.restarts:
                self.state = "failed"
                return
            self.state = "backoff"
            if self.stopping.wait(min(self.max_backoff_s, 2.0 ** self.restarts)):
                break
            self.restarts += 1
            self._spawn()
        self.state = "stopped"

    def restart_fenced(self) -> bool:
        """Whether to start a fenced process again: only on a node Ray still counts alive (the module's docstring).
        While the node is cut off from the head, asking blocks until it is back (then Ray ends this actor)."""
        with open(self.log, "a") as log:
            log.write(f"{self.name}: exited fenced (code {FENCED_EXIT_CODE}); asking Ray whether this node "
                      f"still counts before starting it again\n")
        return node_counted_alive(self.node_id)

    def info(self) -> dict:
        """Where and how the service runs now (what `status` shows)."""
        return {"name": self.name, "pid": self.proc.pid if self.proc else None, "state": self.state,
                "restarts": self.restarts, "exit_code": self.exit_code, "started_at": self.started_at,
                "log": str(self.log), "host": socket.gethostname(), "node_id": self.node_id,
                "node_ip": self.node_ip, "data_dir": str(self.dir / "data")}

    def awaiting(self) -> str:
        """The spec's readiness check, run here: `127.0.0.1:port` means this node's port."""
        return self.ready() if self.ready is not None else ""

    def stop(self, grace_s: float = 10.0) -> None:
        self.stopping.set()
        if self.proc is not None and self.proc.poll() is None:
            stop_service(self.proc.pid, grace_s)
        self.state = "stopped"


def node_counted_alive(node_id: str) -> bool:
    """Whether Ray's GCS counts node `node_id` alive (a restarted actor's old node does not)."""
    import ray

    return any(node["NodeID"] == node_id and node["Alive"] for node in ray.nodes())

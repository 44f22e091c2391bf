"""A second simulated host on this machine: its own network namespace joined to ours by a veth pair.

`SecondHost.create()` makes namespace `sf-<tag>` with one interface `sfb<tag>` at `there_ip`, our end
`sfa<tag>` at `here_ip` (a free /30 in 10.213.0.0/16), and loopback up. The two ends reach each other
only through those two addresses: nothing the test process binds to 127.0.0.1 is reachable from there.
`command` wraps an argv so it runs inside, with `hidden` directories covered by an empty tmpfs in its own
mount namespace (`ip netns exec` gives each command one), so the other host cannot read our files either.
Needs root and `ip` (iproute2); `NamespaceUnavailable` says why not. `RemoteWorker` drives the rollout worker
that tests/weights/remote_worker.py runs there.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import signal
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]  # the checkout, where `python -m tests.weights.remote_worker` runs


class NamespaceUnavailable(RuntimeError):
    """The network namespace or the veth pair could not be made here (the exact error is the message)."""


def _ip(*args: str) -> str:
    try:
        done = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise NamespaceUnavailable(f"ip {' '.join(args)}: {exc}") from exc
    if done.returncode != 0:
        raise NamespaceUnavailable(f"ip {' '.join(args)}: {done.stderr.strip()}")
    return done.stdout


def _free_subnet() -> int:
    """The third octet of a 10.213.<n>.0/30 no interface here uses."""
    used = _ip("-o", "-4", "addr", "show")
    for _ in range(50):
        octet = secrets.randbelow(250) + 2
        if f"10.213.{octet}." not in used:
            return octet
    raise NamespaceUnavailable("no free 10.213.x.0/30 subnet")


@dataclass
class SecondHost:
    name: str
    here_if: str
    there_if: str
    here_ip: str
    there_ip: str

    @classmethod
    def create(cls) -> SecondHost:
        tag, octet = secrets.token_hex(3), _free_subnet()
        host = cls(f"sf-{tag}", f"sfa{tag}", f"sfb{tag}", f"10.213.{octet}.1", f"10.213.{octet}.2")
        _ip("netns", "add", host.name)
        try:
            _ip("link", "add", host.here_if, "type", "veth", "peer", "name", host.there_if, "netns", host.name)
            _ip("addr", "add", f"{host.here_ip}/30", "dev", host.here_if)
            _ip("link", "set", host.here_if, "up")
            for args in (("addr", "add", f"{host.there_ip}/30", "dev", host.there_if),
                         ("link", "set", host.there_if, "up"), ("link", "set", "lo", "up")):
                _ip("netns", "exec", host.name, "ip", *args)
        except NamespaceUnavailable:
            host.destroy()
            raise
        return host

    def command(self, argv: list[str], hidden: Sequence[Path] = ()) -> list[str]:
        mounts = "".join(f'mount -t tmpfs -o size=1m none "{Path(p)}" && ' for p in hidden)
        return ["ip", "netns", "exec", self.name, "sh", "-c", f'{mounts}exec "$@"', "sh", *argv]

    def pids(self) -> list[int]:
        with contextlib.suppress(NamespaceUnavailable):
            return [int(p) for p in _ip("netns", "pids", self.name).split()]
        return []

    def destroy(self) -> None:
        """Kill what still runs inside (only processes this test started live there), then remove both."""
        for pid in self.pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        for args in (("netns", "del", self.name), ("link", "del", self.here_if)):
            with contextlib.suppress(NamespaceUnavailable):
                _ip(*args)


class RemoteWorker:
    """The worker process inside the namespace: one JSON line per command in, one ack per line out."""

    def __init__(self, argv: list[str], log: Path) -> None:
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, cwd=ROOT, env=env)

    def line(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        text = self.proc.stdout.readline()
        if not text:
            raise AssertionError(f"the remote worker exited ({self.proc.wait()}); see {self.log.name}")
        return json.loads(text)

    def send(self, **command: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.line()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # end of input: the worker stops its engine and exits
        try:
            self.proc.wait(timeout=60)
        finally:
            self.log.close()

"""A process replaced while frozen (a zombie) and a service fenced by a newer process of itself are not
restarted: restarting them would fence the newer process in turn (ping-pong). A fenced service with no newer
process (the broker timed out its transaction while it was frozen) is restarted as any crash is."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from seamlessflow.kafka.fencing import FENCED_EXIT_CODE
from seamlessflow.stack.processes import STACK_ENV, pid_alive
from seamlessflow.stack.supervisor import FENCED_EXIT_CODE as SUPERVISOR_FENCED
from seamlessflow.stack.supervisor import ServiceSpec, Supervisor
from seamlessflow.testing.waiting import wait_until

# Exits fenced once a file named after its own pid appears: each process of the service is fenced on its own.
ROLE = """
import os, sys, time
mark = os.path.join(sys.argv[1], f"{os.getpid()}.fenced")
while not os.path.exists(mark):
    time.sleep(0.05)
sys.exit(3)
"""


def role(tmp_path: Path) -> ServiceSpec:
    return ServiceSpec("trainer", [sys.executable, "-c", ROLE, str(tmp_path)])


def fence(tmp_path: Path, pid: int) -> None:
    (tmp_path / f"{pid}.fenced").write_text("")


def test_the_exit_codes_agree() -> None:
    assert SUPERVISOR_FENCED == FENCED_EXIT_CODE


def test_a_replaced_process_runs_on_frozen_and_its_fenced_exit_is_logged_not_restarted(tmp_path: Path) -> None:
    said: list[str] = []
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2, say=said.append)
    sup.start(role(tmp_path))
    old = sup.states["trainer"].pid
    assert old is not None
    try:
        os.kill(old, signal.SIGSTOP)
        new = sup.replace("trainer")
        assert new != old and sup.states["trainer"].pid == new and pid_alive(old)
        os.kill(old, signal.SIGCONT)
        fence(tmp_path, old)

        def reaped() -> bool:
            sup.check()
            return old in sup.replaced_exits
        assert wait_until(reaped, 10)
        assert sup.replaced_exits[old] == FENCED_EXIT_CODE
        assert (sup.states["trainer"].pid, sup.states["trainer"].restarts) == (new, 0) and pid_alive(new)
        assert any("not restarted" in line and str(old) in line for line in said)
    finally:
        sup.stop_all()
    assert not pid_alive(new)


def test_stop_all_ends_a_replaced_process_still_frozen(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=30)
    sup.start(role(tmp_path))
    old = sup.states["trainer"].pid
    assert old is not None
    os.kill(old, signal.SIGSTOP)
    sup.replace("trainer")
    sup.stop_all()  # woken first: no 30 s grace for a stopped process
    assert not pid_alive(old) and sup.replaced_exits[old] is not None


def test_a_service_fenced_by_a_newer_process_of_itself_watches_that_one_instead(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2)
    spec = role(tmp_path)
    sup.start(spec)
    old = sup.states["trainer"].pid
    assert old is not None
    newer = subprocess.Popen(spec.argv, env={**os.environ, STACK_ENV: str((tmp_path / "run").resolve())})
    try:
        fence(tmp_path, old)

        def handed_over() -> bool:
            sup.check()
            return sup.states["trainer"].pid == newer.pid
        assert wait_until(handed_over, 10)
        assert sup.states["trainer"].restarts == 0 and sup.states["trainer"].state == "running"
    finally:
        sup.stop_all()
        newer.wait(10)


def test_a_service_fenced_with_no_newer_process_is_restarted(tmp_path: Path) -> None:
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2)
    sup.start(role(tmp_path))
    old = sup.states["trainer"].pid
    assert old is not None
    try:
        fence(tmp_path, old)

        def restarted() -> bool:
            sup.check()
            return sup.states["trainer"].restarts == 1 and sup.states["trainer"].pid != old
        assert wait_until(restarted, 10)
        assert sup.states["trainer"].exit_code is None  # the new process's; the fenced one's was 3
    finally:
        sup.stop_all()

"""The supervisor restarts crashed services and leaves no process behind, grandchildren included."""

import os
import signal
import sys
import time

import pytest

from seamlessflow.stack.processes import pid_alive, stack_processes
from seamlessflow.stack.supervisor import ServiceSpec, StartupFailed, Supervisor, read_state
from seamlessflow.testing.waiting import wait_until

# A service that starts a helper in its own session (as a rollout worker starts vLLM) and records its pid.
SPAWNER = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
open(sys.argv[1], "w").write(str(child.pid))
time.sleep(600)
"""


def test_orphaned_grandchild_in_its_own_session_is_stopped(tmp_path):
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2)
    pid_file = tmp_path / "child.pid"
    sup.start(ServiceSpec("spawner", [sys.executable, "-c", SPAWNER, str(pid_file)]))
    assert wait_until(lambda: pid_file.exists() and pid_file.read_text())
    grandchild = int(pid_file.read_text())
    os.kill(sup.states["spawner"].pid, signal.SIGKILL)  # the service dies; its helper is orphaned
    time.sleep(0.5)
    assert pid_alive(grandchild)
    sup.stop_all()
    assert wait_until(lambda: not pid_alive(grandchild), 10), "an orphaned grandchild survived stop_all"


def test_crashed_service_is_restarted_with_backoff(tmp_path):
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2)
    sup.start(ServiceSpec("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"]))
    first = sup.states["sleeper"].pid
    os.kill(first, signal.SIGKILL)

    def restarted():
        sup.check()
        return sup.states["sleeper"].restarts == 1 and sup.states["sleeper"].pid != first
    try:
        assert wait_until(restarted, 10)
        assert sup.states["sleeper"].state == "running"
        second = sup.states["sleeper"].pid
    finally:
        sup.stop_all()
    assert not pid_alive(second)


def test_stop_all_leaves_alone_what_its_host_process_started_before_it(tmp_path):
    """`up`'s supervisor owns its process; one embedded in another (a test run with a session broker) must
    not stop that process's earlier children."""
    import subprocess

    earlier = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        time.sleep(0.2)
        sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2)
        sup.start(ServiceSpec("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"]))
        ours = sup.states["sleeper"].pid
        sup.stop_all()
        assert not pid_alive(ours) and earlier.poll() is None
    finally:
        earlier.kill()
        earlier.wait()


def test_a_service_stopped_by_name_is_not_restarted(tmp_path):
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2)
    try:
        sup.start(ServiceSpec("load", [sys.executable, "-c", "import time; time.sleep(600)"]))
        sup.start(ServiceSpec("other", [sys.executable, "-c", "import time; time.sleep(600)"]))
        pid = sup.states["load"].pid
        sup.stop("load")
        sup.check()
        time.sleep(1.2)
        sup.check()
        assert not pid_alive(pid) and sup.states["load"].state == "stopped" and sup.states["load"].pid is None
        assert sup.states["other"].state == "running"
    finally:
        sup.stop_all()


def test_a_service_is_listed_before_its_wait_and_the_wait_says_what_it_waits_for(tmp_path):
    """`down` during a start must find the service being waited on, and a wait that cannot end says why
    (in the state file, which `status` shows, and in the log) instead of sitting silent."""
    said = []
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2, say=said.append)
    assert read_state(tmp_path / "run")["supervisor_pid"] == os.getpid()  # findable from its first moment
    seen_while_waiting = {}

    def awaiting():
        state = read_state(tmp_path / "run")["services"].get("slow", {})
        seen_while_waiting.update(pid=state.get("pid"), waiting_for=state.get("waiting_for"))
        return "the moon to rise"
    spec = ServiceSpec("slow", [sys.executable, "-c", "import time; time.sleep(600)"], ready=awaiting,
                       ready_timeout_s=1.5)
    try:
        with pytest.raises(StartupFailed, match="still waiting for the moon to rise"):
            sup.start(spec)
        assert seen_while_waiting["pid"] == sup.states["slow"].pid and pid_alive(seen_while_waiting["pid"])
        assert read_state(tmp_path / "run")["services"]["slow"]["waiting_for"] == "the moon to rise"
    finally:
        sup.stop_all()


def test_stack_processes_finds_every_process_of_the_stack_wherever_it_was_reparented(tmp_path):
    sup = Supervisor(tmp_path / "run", tmp_path / "logs", grace_s=2)
    pid_file = tmp_path / "child.pid"
    sup.start(ServiceSpec("spawner", [sys.executable, "-c", SPAWNER, str(pid_file)]))
    try:
        assert wait_until(lambda: pid_file.exists() and pid_file.read_text())
        found = {p.pid for p in stack_processes(tmp_path / "run")}
        assert found == {sup.states["spawner"].pid, int(pid_file.read_text())}
        assert stack_processes(tmp_path / "elsewhere") == []
    finally:
        sup.stop_all()

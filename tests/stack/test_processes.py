"""`stack_processes`: what `down`, adoption and a kill -9 of a stack find of it; `stop_service`: how one stops."""

import os
import subprocess
import sys
import time

import psutil

from seamlessflow.stack.processes import STACK_ENV, stack_processes, stop_service
from seamlessflow.testing.waiting import wait_until

# A service (a session leader, as the supervisor starts it) whose child renames itself as vLLM's engine core
# does (setproctitle), which clears the child's environment and so its SEAMLESSFLOW_STACK.
SERVICE = """
import subprocess, sys, time
subprocess.Popen([sys.executable, "-c", "import setproctitle, sys, time; "
                  "setproctitle.setproctitle('VLLM::EngineCore'); open(sys.argv[1], 'w').close(); time.sleep(120)",
                  sys.argv[1]])
time.sleep(120)
"""


def test_a_renamed_child_without_its_environment_is_found_by_its_service_session(tmp_path):
    run_dir, ready = tmp_path / "run", tmp_path / "renamed"
    run_dir.mkdir()
    service = subprocess.Popen([sys.executable, "-c", SERVICE, str(ready)], start_new_session=True,
                               env={**os.environ, STACK_ENV: str(run_dir.resolve())})
    try:
        wait_until(ready.exists, 30, "the child to rename itself")
        time.sleep(0.2)
        found = {p.pid: p for p in stack_processes(run_dir)}
        assert service.pid in found and len(found) == 2, found
        child = next(p for pid, p in found.items() if pid != service.pid)
        assert child.name().startswith("VLLM") and STACK_ENV not in child.environ()  # found by its session alone
    finally:
        for proc in stack_processes(run_dir):
            proc.kill()
        service.wait(10)


def test_the_callers_own_session_is_never_taken_for_the_stacks(tmp_path):
    """A supervisor run in the foreground shares its shell's session: the shell is not the stack's."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    marked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                              env={**os.environ, STACK_ENV: str(run_dir.resolve())})
    try:
        assert [p.pid for p in stack_processes(run_dir)] == [marked.pid]  # not this process nor its session
    finally:
        marked.kill()
        marked.wait(10)


# A service with a child (its engine) that, when told to stop, starts another child (as a weight load that failed
# on a dying engine started a new one) and exits without stopping either.
STOPPING_SERVICE = """
import signal, subprocess, sys, time
log = sys.argv[1]
child = ("import signal, sys, time; signal.signal(signal.SIGTERM, lambda *a: "
         "(open(sys.argv[1], 'a').write(sys.argv[2] + chr(10)), sys.exit(0))); time.sleep(120)")
subprocess.Popen([sys.executable, "-c", child, log, "engine"])
def stop(*_):
    open(log, "a").write("service" + chr(10))
    subprocess.Popen([sys.executable, "-c", child, log, "late engine"], start_new_session=True)
    time.sleep(1.0)
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
open(log + ".ready", "w").close()
time.sleep(120)
"""


def test_a_service_is_told_to_stop_before_its_children_and_none_it_started_meanwhile_is_left(tmp_path):
    log = tmp_path / "signals.log"
    service = subprocess.Popen([sys.executable, "-c", STOPPING_SERVICE, str(log)])
    wait_until(lambda: (tmp_path / "signals.log.ready").exists(), 30, "the service to start", every_s=0.05)
    wait_until(lambda: len(psutil.Process(service.pid).children()) == 1, 30, "its engine", every_s=0.05)
    stop_service(service.pid, grace_s=10)
    service.wait(timeout=10)
    lines = log.read_text().splitlines()
    assert lines[0] == "service" and sorted(lines[1:]) == ["engine", "late engine"], lines


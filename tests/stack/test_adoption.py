"""A stack whose supervisor was killed with -9 is found (its services run on), and the next supervisor adopts
it or stops it first: never a second set beside the first."""

import os
import signal
import subprocess
import sys
import time

from seamlessflow.config import Settings
from seamlessflow.stack.adoption import take_over
from seamlessflow.stack.paths import config_path
from seamlessflow.stack.placement_choice import recorded
from seamlessflow.stack.processes import pid_alive, stack_processes
from seamlessflow.stack.status import supervisor_words
from seamlessflow.stack.supervisor import read_state
from seamlessflow.testing.waiting import wait_until

# A foreground `up` in miniature: one service, held until SIGTERM; "adopt" takes over what a dead one recorded,
# "stray" also leaves a process of the stack that no service holds.
HOLDER = """
import os, signal, subprocess, sys, time
from pathlib import Path
from seamlessflow.stack.supervisor import ServiceSpec, Supervisor, read_state
from seamlessflow.stack.processes import STACK_ENV
run = Path(sys.argv[1]) / "run"
adopt = (read_state(run) or {}).get("services") if sys.argv[2] == "adopt" else None
sup = Supervisor(run, Path(sys.argv[1]) / "logs", grace_s=2, adopt=adopt)
signal.signal(signal.SIGTERM, lambda *_: (sup.stop_all(), sys.exit(0)))
if sys.argv[2] == "stray":
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True,
                     env={**os.environ, STACK_ENV: str(run.resolve())})
sup.start(ServiceSpec("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"]))
sup.info["generation"] = "g1"
sup.ready = True
sup.write_state()
while True:
    sup.check()
    time.sleep(0.2)
"""


def hold(tmp_path, mode: str) -> subprocess.Popen:
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path), mode])
    ready = lambda: (s := read_state(tmp_path / "run") or {}).get("ready") and s["supervisor_pid"] == holder.pid  # noqa: E731
    assert wait_until(ready, 30), "the holder did not start"
    return holder


def killed_holder(tmp_path) -> tuple[Settings, int]:
    """A stack whose supervisor was killed with -9, and its sleeper's pid (still running)."""
    settings = Settings(data_dir=tmp_path, stop_grace_s=2)
    holder = hold(tmp_path, "stray")
    holder.kill()
    holder.wait()
    return settings, read_state(tmp_path / "run")["services"]["sleeper"]["pid"]


def sleepers(tmp_path) -> list[int]:
    return [p.pid for p in stack_processes(tmp_path / "run") if "time.sleep(600)" in " ".join(p.cmdline())]


def test_a_killed_supervisors_services_are_found_running_without_it(tmp_path):
    settings, sleeper = killed_holder(tmp_path)
    try:
        stack = recorded(settings)
        assert stack.running() == "" and stack.without_holder() == {"sleeper": sleeper}
        running, (row,) = stack.services()
        assert running and (row["pid"], row["state"]) == (sleeper, "running")
        assert supervisor_words(stack.state, running) == f"gone (pid {stack.state['supervisor_pid']})"
    finally:
        recorded(settings).stop(print)
    assert stack_processes(tmp_path / "run") == []


def test_the_next_supervisor_adopts_the_running_service_and_restarts_it_when_it_dies(tmp_path):
    settings, sleeper = killed_holder(tmp_path)
    assert len(sleepers(tmp_path)) == 2  # the service, and the stray that no service holds
    adopter = hold(tmp_path, "adopt")
    try:
        assert read_state(tmp_path / "run")["services"]["sleeper"]["pid"] == sleeper  # adopted, not started again
        assert wait_until(lambda: sleepers(tmp_path) == [sleeper], 10), "the stray was not stopped"
        os.kill(sleeper, signal.SIGKILL)  # not its child: it notices by pid, and starts it again from its spec
        restarted = lambda: read_state(tmp_path / "run")["services"]["sleeper"]["pid"] not in (None, sleeper)  # noqa: E731
        assert wait_until(restarted, 15), "the adopted service was not restarted"
        time.sleep(0.5)
        assert len(sleepers(tmp_path)) == 1
    finally:
        recorded(settings).stop(print)
        adopter.kill()
    assert stack_processes(tmp_path / "run") == []


def test_up_adopts_a_stack_of_its_own_config_and_stops_one_of_another_first(tmp_path):
    settings, sleeper = killed_holder(tmp_path)
    settings.dump_yaml(config_path(settings))  # what the stack was started with
    said: list[str] = []
    try:
        started, adopt = take_over(recorded(settings), settings.with_overrides(generation="g2"), said.append)
        assert started.generation == "g1" and list(adopt) == ["sleeper"]  # its generation goes on
        assert said == [f"a stack without its supervisor (pid {recorded(settings).state['supervisor_pid']} gone; "
                        "1 services alive) was adopted"]
        assert pid_alive(sleeper)

        other = settings.with_overrides(stop_grace_s=1)
        started, adopt = take_over(recorded(other), other, said.append)
        assert adopt == {} and said[-1].endswith("was stopped first: it runs another configuration than this start's")
        assert stack_processes(tmp_path / "run") == []
        assert take_over(recorded(other), other, said.append) == (other, {}) and len(said) == 2  # nothing left
    finally:
        recorded(settings).stop(print)

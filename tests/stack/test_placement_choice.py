"""One interface for both placements: which one a new stack gets, and what `down`, `status`, `scale` and the
chaos run find of a stack from another process (a supervisor's pids here, a Ray namespace there)."""

import subprocess
import sys

import pytest
from click.testing import CliRunner

from seamlessflow.cli.main import cli
from seamlessflow.config import Settings
from seamlessflow.stack.placement_choice import LocalRecord, RayRecord, placement_for, recorded
from seamlessflow.stack.placement_protocol import PlacementError
from seamlessflow.stack.processes import pid_alive, stack_processes
from seamlessflow.stack.supervisor import Supervisor, read_state
from seamlessflow.testing.waiting import wait_until

# A foreground `up` in miniature: a supervisor with one service, holding it until SIGTERM.
HOLDER = """
import signal, sys, time
from pathlib import Path
from seamlessflow.stack.supervisor import ServiceSpec, Supervisor
sup = Supervisor(Path(sys.argv[1]) / "run", Path(sys.argv[1]) / "logs", grace_s=2)
signal.signal(signal.SIGTERM, lambda *_: (sup.stop_all(), sys.exit(0)))
sup.start(ServiceSpec("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"]))
sup.ready = True
sup.write_state()
while True:
    sup.check()
    time.sleep(0.2)
"""


def test_a_new_stack_is_placed_by_cluster_engine(tmp_path):
    settings = Settings(data_dir=tmp_path)
    placement, placed = placement_for(settings)
    assert isinstance(placement, Supervisor) and placed is settings  # this machine: nothing to tell the services
    with pytest.raises(PlacementError, match="cluster.engine is ray but no address"):
        placement_for(settings.with_overrides(cluster={"engine": "ray"}))


def test_with_nothing_recorded_nothing_runs_and_a_local_stack_takes_no_engines(tmp_path):
    stack = recorded(Settings(data_dir=tmp_path))
    assert isinstance(stack, LocalRecord)
    assert (stack.running(), stack.services(), stack.pids()) == ("", (False, []), {})
    assert stack.stop(print) is False
    with pytest.raises(PlacementError, match="the local stack runs on one machine"):
        stack.attach(print)


def test_a_local_stack_is_found_and_stopped_from_another_process(tmp_path):
    settings = Settings(data_dir=tmp_path, stop_grace_s=2)
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)])
    try:
        assert wait_until(lambda: (read_state(tmp_path / "run") or {}).get("ready"), 30), "the holder did not start"
        stack = recorded(settings)
        assert stack.running() == f"(supervisor pid {holder.pid})"
        sleeper = stack.pids()["sleeper"]
        running, (row,) = stack.services()
        assert running and row["name"] == "sleeper" and row["pid"] == sleeper and pid_alive(sleeper)
        assert stack.stop(print) is True
        assert holder.wait(10) == 0  # it stopped its own services on SIGTERM
        assert not pid_alive(sleeper) and stack_processes(tmp_path / "run") == []
        assert recorded(settings).running() == ""
    finally:
        holder.kill()


def test_a_stack_on_ray_says_where_it_ran_even_with_the_cluster_gone(tmp_path):
    state = {"supervisor_pid": None, "services": {"proxy": {"state": "running", "pid": 4242}},
             "placement": {"engine": "ray", "address": "127.0.0.1:1", "namespace": "seamlessflow-gone"}}
    stack = RayRecord(Settings(data_dir=tmp_path), state)
    running, (row,) = stack.services()
    assert not running and (row["name"], row["state"], row["pid"]) == ("proxy", "unknown", None)
    assert stack.running() == ""
    said: list[str] = []
    assert stack.stop(said.append) is True
    assert said[0].startswith("the cluster is gone or unreachable")
    with pytest.raises(PlacementError, match="faults by pid need the local stack"):
        stack.pids()


def test_scale_without_a_supervisor_is_one_line_saying_why_not(tmp_path):
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "scale", "rollout=+1"])
    assert result.exit_code == 1 and "no supervisor holds a stack" in result.output.replace("\n", " ")

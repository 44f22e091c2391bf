"""`seamlessflow up --detach`, `status`, `tail`, `down` as a user runs them, as real processes."""

import json
import os
import signal

import pytest

from seamlessflow.ports import free_port_block
from seamlessflow.supervisor import pid_alive
from seamlessflow.testing.cli import run_cli
from seamlessflow.testing.waiting import wait_until


@pytest.mark.slow
def test_up_status_restart_down_leaves_no_process(tmp_path):
    port = free_port_block(2)
    started = run_cli(tmp_path, port, "up", "--detach", "--only-broker")
    assert started.returncode == 0, started.stdout + started.stderr
    assert "SeamlessFlow is up" in started.stdout

    status = json.loads(run_cli(tmp_path, port, "status", "--json").stdout)
    assert status["running"] and status["broker_reachable"]
    broker = next(s for s in status["services"] if s["name"] == "broker")
    pids = {status["supervisor_pid"], broker["pid"]}

    listed = run_cli(tmp_path, port, "topics", "list")
    assert "seamlessflow.session-events" in listed.stdout.replace("\n", "") or "4/4" in listed.stdout

    os.kill(broker["pid"], signal.SIGKILL)  # a crash: the supervisor restarts it with backoff
    def restarted():
        s = json.loads(run_cli(tmp_path, port, "status", "--json").stdout)
        b = next(x for x in s["services"] if x["name"] == "broker")
        return b["restarts"] >= 1 and b["pid"] and s["broker_reachable"]
    wait_until(restarted, what="the supervisor to restart the killed broker", every_s=0.3)
    status = json.loads(run_cli(tmp_path, port, "status", "--json").stdout)
    pids |= {s["pid"] for s in status["services"] if s["pid"]}

    stopped = run_cli(tmp_path, port, "down")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not [pid for pid in pids if pid_alive(pid)], "processes left behind after down"
    assert json.loads(run_cli(tmp_path, port, "status", "--json").stdout)["running"] is False


def test_down_with_nothing_running_is_harmless(tmp_path):
    port = free_port_block(2)
    assert "nothing is running" in run_cli(tmp_path, port, "down").stdout

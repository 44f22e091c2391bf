"""`seamlessflow up --detach`, `status`, `tail`, `down` as a user runs them, as real processes."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from seamlessflow.ports import free_port_block
from seamlessflow.supervisor import pid_alive


def sf(data_dir, port, *args, timeout=120):
    cmd = [sys.executable, "-m", "seamlessflow", "--data-dir", str(data_dir), "--broker-port", str(port), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def wait_for(predicate, timeout_s=60.0):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.3)
    return False


@pytest.mark.slow
def test_up_status_restart_down_leaves_no_process(tmp_path):
    port = free_port_block(2)
    started = sf(tmp_path, port, "up", "--detach", "--only-broker")
    assert started.returncode == 0, started.stdout + started.stderr
    assert "SeamlessFlow is up" in started.stdout

    status = json.loads(sf(tmp_path, port, "status", "--json").stdout)
    assert status["running"] and status["broker_reachable"]
    broker = next(s for s in status["services"] if s["name"] == "broker")
    pids = {status["supervisor_pid"], broker["pid"]}

    listed = sf(tmp_path, port, "topics", "list")
    assert "seamlessflow.session-events" in listed.stdout.replace("\n", "") or "4/4" in listed.stdout

    os.kill(broker["pid"], signal.SIGKILL)  # a crash: the supervisor restarts it with backoff
    def restarted():
        s = json.loads(sf(tmp_path, port, "status", "--json").stdout)
        b = next(x for x in s["services"] if x["name"] == "broker")
        return b["restarts"] >= 1 and b["pid"] and s["broker_reachable"]
    assert wait_for(restarted), "the supervisor did not restart the killed broker"
    status = json.loads(sf(tmp_path, port, "status", "--json").stdout)
    pids |= {s["pid"] for s in status["services"] if s["pid"]}

    stopped = sf(tmp_path, port, "down")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not [pid for pid in pids if pid_alive(pid)], "processes left behind after down"
    assert json.loads(sf(tmp_path, port, "status", "--json").stdout)["running"] is False


def test_down_with_nothing_running_is_harmless(tmp_path):
    port = free_port_block(2)
    assert "nothing is running" in sf(tmp_path, port, "down").stdout

"""`seamlessflow up --detach`, `status`, `tail`, `down` as a user runs them, as real processes."""

import json
import os
import signal
import socket
import subprocess
import sys

import pytest

from seamlessflow.ports import free_port_block
from seamlessflow.stack.supervisor import pid_alive
from seamlessflow.testing.waiting import wait_until


def sf(data_dir, port, *args, timeout=120):
    cmd = [sys.executable, "-m", "seamlessflow", "--data-dir", str(data_dir), "--broker-port", str(port), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.slow
def test_up_status_restart_down_leaves_no_process(tmp_path):
    port = free_port_block(2)
    started = sf(tmp_path, port, "up", "--detach", "--only-broker")
    assert started.returncode == 0, started.stdout + started.stderr
    assert "SeamlessFlow is up" in started.stdout

    status = json.loads(sf(tmp_path, port, "status", "--json").stdout)
    assert status["running"] and status["broker_reachable"]
    broker = next(s for s in status["services"] if s["name"] == "broker")
    assert (broker["host"], broker["node_ip"]) == (socket.gethostname(), "127.0.0.1")  # where it runs
    assert status["placement"] == {"engine": "local"}
    pids = {status["supervisor_pid"], broker["pid"]}

    listed = sf(tmp_path, port, "topics", "list")
    assert "seamlessflow.session-events" in listed.stdout.replace("\n", "") or "4/4" in listed.stdout

    os.kill(broker["pid"], signal.SIGKILL)  # a crash: the supervisor restarts it with backoff
    def restarted():
        s = json.loads(sf(tmp_path, port, "status", "--json").stdout)
        b = next(x for x in s["services"] if x["name"] == "broker")
        return b["restarts"] >= 1 and b["pid"] and s["broker_reachable"]
    assert wait_until(restarted), "the supervisor did not restart the killed broker"
    status = json.loads(sf(tmp_path, port, "status", "--json").stdout)
    pids |= {s["pid"] for s in status["services"] if s["pid"]}

    stopped = sf(tmp_path, port, "down")
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert not [pid for pid in pids if pid_alive(pid)], "processes left behind after down"
    assert json.loads(sf(tmp_path, port, "status", "--json").stdout)["running"] is False


def test_down_with_nothing_running_is_harmless(tmp_path):
    port = free_port_block(2)
    assert "nothing is running" in sf(tmp_path, port, "down").stdout


@pytest.mark.slow
def test_down_in_the_middle_of_the_start_stops_every_process_engines_included(tmp_path, vllm_model_dir):
    """`down` while `up` still waits for the engines: nothing of the stack is left, not even a vLLM engine
    that its worker started a moment ago (it was once left running, re-parented to init)."""
    from seamlessflow.stack.supervisor import read_state, stack_processes
    from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV

    port, config = free_port_block(2), tmp_path / "config.yaml"
    config.write_text(json.dumps({"rollout": {"model": str(vllm_model_dir), "max_model_len": 256,
                                              "extra_args": LEAN_ENGINE_ARGS, "env": LEAN_ENGINE_ENV}}))
    starting = subprocess.Popen(
        [sys.executable, "-m", "seamlessflow", "--config", str(config), "--data-dir", str(tmp_path), "--broker-port",
         str(port), "up", "--only", "rollout"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    run = tmp_path / "run"

    def engine_starting():
        listed = (read_state(run) or {}).get("services", {})
        engines = [p for p in stack_processes(run) if "vllm.entrypoints" in " ".join(p.cmdline())]
        return "rollout-1" in listed and engines
    try:
        assert wait_until(engine_starting, 180), "no engine started"
        assert (read_state(run) or {})["ready"] is False  # still starting
        seen = {p.pid for p in stack_processes(run)}
        stopped = sf(tmp_path, port, "down", timeout=180)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        assert starting.wait(30) is not None
        assert not [pid for pid in seen if pid_alive(pid)] and stack_processes(run) == []
    finally:
        starting.kill()
        for proc in stack_processes(run):
            proc.kill()

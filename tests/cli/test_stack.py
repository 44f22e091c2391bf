"""`seamlessflow up --detach`, `status`, `tail`, `down` as a user runs them, as real processes."""

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter

import pytest

from seamlessflow.chaos.config import ChaosConfig
from seamlessflow.chaos.driver import Driver
from seamlessflow.chaos.stack import random_tiny_model
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.messages import WeightVersion
from seamlessflow.ports import free_port, free_port_block
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.stack.processes import pid_alive, stack_processes
from seamlessflow.stack.supervisor import read_state
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics


def sf(data_dir, port, *args, timeout=120):
    cmd = [sys.executable, "-m", "seamlessflow", "--data-dir", str(data_dir), "--broker-port", str(port), *args]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


@pytest.mark.timeout(150)
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


@pytest.mark.timeout(150)
@pytest.mark.slow
def test_down_in_the_middle_of_the_start_stops_every_process_engines_included(tmp_path, vllm_model_dir):
    """`down` while `up` still waits for the engines: nothing of the stack is left, not even a vLLM engine
    that its worker started a moment ago (it was once left running, re-parented to init)."""
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


def stack_roles(run) -> Counter:
    """How many of each service run for the stack of `run`, counted from the processes (a service's own forks,
    which carry its command line, are not counted again); the supervisor (`up`) counts as one."""
    procs = {p.pid: p for p in stack_processes(run)}

    def role(proc):
        argv = proc.cmdline()
        if "kafka.Kafka" in argv:
            return "broker"
        services = [a.split(".")[1] for a in argv if a.startswith("services.")]
        return services[0] if services else "supervisor" if "up" in argv else None
    roles = {pid: role(proc) for pid, proc in procs.items()}
    return Counter(r for pid, r in roles.items() if r and roles.get(procs[pid].ppid()) != r)


@pytest.mark.timeout(450)
@pytest.mark.slow
def test_up_after_the_supervisor_was_killed_runs_one_of_each_service(tmp_path):
    """Issue #43: kill -9 of the supervisor of a training stack, then `up --detach` again, used to start a
    second full set beside the first. Now the new supervisor adopts the running services (the trainer keeps
    its step), `status` said meanwhile that they ran without one, and `down` leaves nothing.

    The stack trains for real on the test's random tiny model: broker, assembler, proxy and trainer, the proxy
    routing to two stub engines the test runs (no vLLM: minutes on a loaded machine), the chaos driver's agents
    the load."""
    data, port, proxy = tmp_path / "data", free_port_block(2), free_port()
    model = random_tiny_model(tmp_path / "model")
    stub = [sys.executable, "-m", "seamlessflow.loadtest.stub_engine"]
    engines = [(p, subprocess.Popen([*stub, str(p), "0"])) for p in (free_port(), free_port())]
    config = tmp_path / "config.yaml"
    config.write_text(json.dumps({
        "services": {"rollout": False, "scheduler": False, "agents": False, "eval": False, "tracking": False,
                     "dashboard": False},
        "stop_grace_s": 5, "metrics": {"port": free_port_block(8)},
        "rollout": {"model": str(model)}, "trainer": {"model_path": str(model), "group_size": 2},
        "proxy": {"port": proxy, "discover_engines": False, "listen_control": False,
                  "engines": [{"id": f"engine-{i}", "url": f"http://127.0.0.1:{p}"}
                              for i, (p, _) in enumerate(engines)]},
    }))
    settings = Settings(data_dir=data, broker_port=port)
    run, codec = data / "run", codec_for(settings)
    key = TeamKeys.from_settings(settings).ensure_default(settings.team) or ""
    driver, services = None, {}

    def up():
        return sf(data, port, "--config", str(config), "up", "--detach", "--wait-s", "400", timeout=460)

    def versions():
        return [m.version for m in messages_until(settings, Topics(settings).weights, codec, timeout_s=5)
                if isinstance(m, WeightVersion)]
    try:
        first = up()
        assert first.returncode == 0, first.stdout + first.stderr
        driver = Driver(f"http://127.0.0.1:{proxy}", key, tmp_path / "ledger.jsonl",
                        ChaosConfig(concurrency=4, group_size=2)).start()
        wait_until(versions, 240, "a version from the trainer", every_s=2)
        before, state = versions()[-1], read_state(run)
        services = {name: svc["pid"] for name, svc in state["services"].items()}
        os.kill(state["supervisor_pid"], signal.SIGKILL)  # the OOM killer, a lost session
        wait_until(lambda: not pid_alive(state["supervisor_pid"]), 10, "the supervisor killed")

        orphaned = json.loads(sf(data, port, "status", "--json").stdout)
        assert orphaned["running"] and orphaned["supervisor"] == f"gone (pid {state['supervisor_pid']})"
        assert {s["name"]: s["pid"] for s in orphaned["services"]} == services

        started = time.monotonic()
        again = up()
        took = time.monotonic() - started
        assert again.returncode == 0, again.stdout + again.stderr
        assert "a stack without its supervisor" in again.stdout and "was adopted" in again.stdout, again.stdout
        adopted = read_state(run)
        assert {name: svc["pid"] for name, svc in adopted["services"].items()} == services  # the same processes
        assert stack_roles(run) == Counter(supervisor=1, broker=1, assembler=1, proxy=1, trainer=1)

        wait_until(lambda: versions()[-1] > before, 180, f"a version after {before}", every_s=2)
        after = versions()
        assert after == sorted(after) and before in after, f"the versions restarted: {after}"
        print(f"adopted in {took:.0f} s; versions {before} -> {after[-1]}")
    finally:
        if driver is not None:
            driver.stop(30)
        stopped = sf(data, port, "down", timeout=180)
        for _, engine in engines:
            engine.kill()
    assert stopped.returncode == 0 and "stopped" in stopped.stdout
    assert stack_processes(run) == [] and not [pid for pid in services.values() if pid_alive(pid)]

"""Every service starts one way (`seamlessflow.service_main`): the agent pool and the proxy, as `up` starts
them, heartbeat on the status topic and exit 0 on SIGTERM, having said they stopped."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest

from seamlessflow.ports import free_port
from seamlessflow.stack.rows import resource_rows

pytestmark = pytest.mark.timeout(180)


def heartbeat_of(settings, kind: str, proc: subprocess.Popen, state: str = "active") -> dict:
    deadline = time.monotonic() + 90
    while True:
        assert proc.poll() is None or state != "active", proc.stdout.read().decode() if proc.stdout else ""
        assert time.monotonic() < deadline, f"no {state} {kind} heartbeat"
        rows = [r for r in resource_rows(settings) if r["kind"] == kind and r["state"] == state]
        if rows:
            return rows[0]
        time.sleep(0.3)


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGTERM)
    return proc.wait(60)


def test_an_agent_pool_and_a_proxy_start_the_one_way_and_stop_on_sigterm(settings, tmp_path):
    config = settings.with_overrides(
        team_keys={settings.team: "key-d"}, agents={"heartbeat_s": 0.5, "revoke_grace_s": 1.0},
        proxy={"port": free_port(), "heartbeat_s": 0.5, "engines": []}).dump_yaml(tmp_path / "config.yaml")
    agents = subprocess.Popen([sys.executable, "-m", "services.agents", "--config", str(config),
                               "seamlessflow.testing.agent_fns:reward_from_payload", "--pool", "p",
                               "--key", "key-d", "--concurrency", "2"],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    proxy = subprocess.Popen([sys.executable, "-m", "services.proxy", "--config", str(config), "--worker", "0"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        row = heartbeat_of(settings, "agent", agents)
        assert (row["active_tag"], row["figures"]["concurrency"]) == ("p", 2.0)
        assert heartbeat_of(settings, "proxy", proxy)["id"] == "proxy-0"
    finally:
        codes = stop(agents), stop(proxy)
    assert codes == (0, 0)
    assert heartbeat_of(settings, "agent", agents, state="stopped")["active_tag"] == "p"

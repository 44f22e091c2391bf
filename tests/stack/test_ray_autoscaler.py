"""Ray's own autoscaler meets what the stack asks for (`cluster.autoscaler`): on a head started with Ray's fake
multi-node provider (`seamlessflow.testing.ray_autoscaling`: Ray's real autoscaler, nodes started as local
processes), with the real embedded broker and assembler as a user runs them (`up --ray`, `scale`, `down`).

A second assembler asks for a resource only a node type has: no node present can hold it, so it waits as a
pending demand, Ray's autoscaler adds a node of that type, and the member runs there; once drained by
`scale assembler=-1` the node is idle and the autoscaler removes it. Engines are placed the same way
(`RayPlacement.start` for every role: `scale rollout=+N` and the autoscale advice on Ray); an engine is not used
here, to keep vLLM out of a placement test. A member for which no node joins in `cluster.node_wait_s`, and the
refusal without `cluster.autoscaler`, are tested without Ray (`tests/stack/test_scale.py`, `test_ray_placement`)."""

import json
import subprocess
import sys
import time

import pytest
import yaml

from seamlessflow.testing.ray_autoscaling import autoscaling_ray_cluster
from seamlessflow.testing.ray_cluster import SMALL_STACK
from seamlessflow.testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.timeout(600)]
NODE_TYPE = {"assembler_node": {"CPU": 1, "assembler_node": 1}}


def sf(config, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "seamlessflow", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout)


def write_config(path, tmp_path, cluster: dict) -> None:
    from seamlessflow.ports import free_port_block

    path.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path / "driver"), "broker_port": free_port_block(2),
        "metrics": {"port": free_port_block(4)}, "services": {**SMALL_STACK, "proxy": False},
        "cluster": {"node_data_dir": str(tmp_path / "nodes"), **cluster}}))


def services(config) -> dict[str, dict]:
    return {s["name"]: s for s in json.loads(sf(config, "status", "--json").stdout)["services"]}


def workers(tmp_path) -> int:
    effective = yaml.safe_load((tmp_path / "driver" / "run" / "config.yaml").read_text())
    return int((effective.get("assembler") or {}).get("workers", 1))


def test_rays_autoscaler_adds_a_node_for_a_scaled_up_member_and_removes_it_once_drained(tmp_path):
    config = tmp_path / "stack.yaml"
    with autoscaling_ray_cluster(NODE_TYPE) as cluster:
        write_config(config, tmp_path, {"autoscaler": True, "node_wait_s": 240,
                                        "resources": {"assembler-1": {"custom": {"assembler_node": 1}}}})
        up = sf(config, "up", "--ray", cluster.address, "--detach")
        assert up.returncode == 0, up.stdout + up.stderr
        try:
            _scale_up_and_down_through_the_autoscaler(config, tmp_path, cluster)
        finally:
            down = sf(config, "down")
        assert down.returncode == 0, down.stdout + down.stderr


def _scale_up_and_down_through_the_autoscaler(config, tmp_path, cluster):
    assert cluster.alive() == 1  # the head only: no node has `assembler_node`
    started = time.monotonic()
    grown = sf(config, "scale", "assembler=+1")
    assert grown.returncode == 0, grown.stdout + grown.stderr
    joined = time.monotonic() - started
    assert "assembler-1: no node present can hold it; it waits up to 240 s for a node that joins" in grown.stdout
    assert cluster.alive() == 2 and services(config)["assembler-1"]["state"] == "running"
    assert workers(tmp_path) == 2

    shrunk = sf(config, "scale", "assembler=-1")
    assert shrunk.returncode == 0, shrunk.stdout + shrunk.stderr
    drained = time.monotonic()
    wait_until(lambda: cluster.alive() == 1, 120, "Ray's autoscaler to remove the idle node", every_s=1)
    print(f"a node joined and assembler-1 ran on it {joined:.0f} s after `scale assembler=+1`; the autoscaler "
          f"removed the node {time.monotonic() - drained:.0f} s after the drain")
    assert "assembler-1" not in services(config) and services(config)["assembler"]["state"] == "running"
    assert workers(tmp_path) == 1

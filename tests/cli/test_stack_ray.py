"""`seamlessflow up --ray ADDRESS`, `status --json` and `down` as a user runs them, against a real 3-node Ray
cluster (each node its own address; two in network namespaces), with the real embedded broker on the head.

A small stack: the broker (on the driver's node), an assembler pinned to node_b and a proxy pinned to node_c
that routes to a StubEngine (a load-test fake, not an engine: the test is about placement) running in node_c's
namespace. One session through the proxy becomes a trajectory: the services on the other nodes reached the
broker, and the proxy authenticated the team with the key the config carried (no directory is shared)."""

import json
import subprocess
import sys
import time
import urllib.request

import pytest

from seamlessflow.ports import free_port_block
from seamlessflow.stack.processes import pid_alive, stop_tree
from seamlessflow.testing.ray_cluster import can_make_namespaces, ray_cluster, small_stack_config
from seamlessflow.testing.waiting import wait_until

NAMESPACES = pytest.mark.skipif(bool(can_make_namespaces()), reason=can_make_namespaces())
def sf(config, *args, timeout=300):
    return subprocess.run([sys.executable, "-m", "seamlessflow", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout)


def post(url: str, key: str, body: dict) -> dict:
    request = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                     headers={"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def test_up_on_an_unreachable_ray_address_is_one_line_naming_it_and_starts_nothing(tmp_path):
    config, _ = small_stack_config(tmp_path, 1)
    up = sf(config, "up", "--ray", "127.0.0.1:1", "--detach", timeout=60)
    assert up.returncode != 0
    assert up.stderr.strip().splitlines() == [up.stderr.strip()]  # one line
    assert "cannot reach the Ray cluster at 127.0.0.1:1" in up.stderr
    assert not (tmp_path / "driver" / "kafka").exists()  # no broker was prepared, let alone started


@pytest.mark.timeout(420)
@pytest.mark.slow
@NAMESPACES
def test_up_on_ray_places_a_small_stack_on_named_nodes_and_down_leaves_no_process(tmp_path):
    with ray_cluster() as cluster:
        engine_port = free_port_block(1)
        stub = subprocess.Popen(["ip", "netns", "exec", cluster.node("node_c").netns, sys.executable, "-m",
                                 "seamlessflow.loadtest.stub_engine", str(engine_port), "0"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        try:
            _up_call_status_down(tmp_path, cluster, engine_port)
        finally:
            stop_tree(stub.pid, 5)


def _up_call_status_down(tmp_path, cluster, engine_port):
    config, proxy_port = small_stack_config(tmp_path, engine_port)
    started = time.monotonic()
    up = sf(config, "up", "--ray", cluster.address, "--detach")
    assert up.returncode == 0, up.stdout + up.stderr
    print(f"up --ray: ready in {time.monotonic() - started:.1f} s")

    status = json.loads(sf(config, "status", "--json").stdout)
    nodes = {s["name"]: s["node_ip"] for s in status["services"]}
    assert nodes == {"broker": cluster.node("node_a").ip, "assembler": cluster.node("node_b").ip,
                     "proxy": cluster.node("node_c").ip}, status["services"]
    assert status["running"] and status["broker_reachable"] and status["placement"]["engine"] == "ray"
    assert all(s["state"] == "running" and s["pid"] and s["host"] for s in status["services"])
    assert status["info"]["proxy"] == f"http://{cluster.node('node_c').ip}:{proxy_port}/v1"  # where agents reach it

    key = (tmp_path / "driver" / "default.key").read_text().strip()
    proxy = f"http://{cluster.node('node_c').ip}:{proxy_port}/sessions/s-ray-1"
    reply = post(f"{proxy}/v1/completions", key, {"model": "any", "prompt": [1, 2, 3], "max_tokens": 4,
                                                  "return_token_ids": True})
    assert reply["choices"][0]["token_ids"]
    post(f"{proxy}/end", key, {"reward": 1.0, "status": "done", "group_id": "g-ray", "task_id": "g-ray"})

    def assembled():
        out = sf(config, "--bootstrap-servers", status["bootstrap_servers"], "tail", "trajectories", "--limit", "1",
                 timeout=60).stdout
        return "s-ray-1" in out
    wait_until(assembled, 120, "the assembler on node_b to publish the session's trajectory", every_s=2)
    _scale_the_assembler_on_ray(config, cluster.node("node_b").ip)

    stopped = sf(config, "down")
    assert stopped.returncode == 0 and "stopped 3 actor(s)" in stopped.stdout, stopped.stdout + stopped.stderr
    pids = [s["pid"] for s in status["services"]]
    assert wait_until(lambda: not [p for p in pids if pid_alive(p)], 30, f"the services' processes {pids} to end")
    after = json.loads(sf(config, "status", "--json").stdout)
    assert not after["running"] and {s["state"] for s in after["services"]} == {"gone"}


def _scale_the_assembler_on_ray(config, node_b: str):
    """`scale assembler=+1` places a second member of the assembler's group by the role's resources (node_b);
    `scale assembler=-1` drains it, its actor ends and the stack's state no longer lists it."""
    grown = sf(config, "scale", "assembler=+1")
    assert grown.returncode == 0, grown.stdout + grown.stderr
    services = {s["name"]: s for s in json.loads(sf(config, "status", "--json").stdout)["services"]}
    assert services["assembler-1"]["state"] == "running" and services["assembler-1"]["node_ip"] == node_b, services
    pid = services["assembler-1"]["pid"]
    shrunk = sf(config, "scale", "assembler=-1")
    assert shrunk.returncode == 0, shrunk.stdout + shrunk.stderr
    services = {s["name"]: s for s in json.loads(sf(config, "status", "--json").stdout)["services"]}
    assert "assembler-1" not in services and services["assembler"]["state"] == "running", services
    assert wait_until(lambda: not pid_alive(pid), 30, f"the drained member's process {pid} to end")

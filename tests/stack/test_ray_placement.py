"""RayPlacement on a real 3-node Ray cluster (each node its own address, two in network namespaces): services
land on the nodes their resources name, run at those nodes' addresses with a config and data directory of
their node's own, are restarted by their actor when their process dies; impossible requests and unreachable
addresses are errors before anything starts."""

import json
import os
import signal
import sys
import threading
import time
import urllib.request

import pytest

from seamlessflow.exit_codes import FENCED_EXIT_CODE
from seamlessflow.ports import free_port, free_port_block
from seamlessflow.stack.placement_protocol import expand_replicas
from seamlessflow.stack.processes import pid_alive
from seamlessflow.stack.ray_placement import PENDING, PlacementError, RayPlacement, actor_states, stop_actors
from seamlessflow.stack.resources import Resources, RestartPolicy
from seamlessflow.stack.services import listening
from seamlessflow.stack.supervisor import NoNodeJoined, ServiceSpec, StartupFailed
from seamlessflow.testing.ray_cluster import can_make_namespaces, ray_cluster
from seamlessflow.testing.waiting import wait_until

pytestmark = [pytest.mark.slow, pytest.mark.skipif(bool(can_make_namespaces()), reason=can_make_namespaces())]

# A service that says, over HTTP on every address of its node, which config it was given and what is in it.
SERVICE = """
import http.server, json, sys, yaml
path = sys.argv[sys.argv.index("--config") + 1]
config = yaml.safe_load(open(path))
body = json.dumps({"config": path, "data_dir": config["data_dir"], "run": config["run"]}).encode()
class Answer(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200)
        self.end_headers()
        self.wfile.write(body)
http.server.ThreadingHTTPServer(("0.0.0.0", int(sys.argv[1])), Answer).serve_forever()
"""


@pytest.fixture(scope="module")
def cluster():
    with ray_cluster() as running:
        yield running
    import ray

    ray.shutdown()


@pytest.fixture
def placement(cluster, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text("run: placed-by-ray\ndata_dir: /nowhere/shared\n")
    namespace = f"sf-test-{os.getpid()}-{time.monotonic_ns()}"
    placed = RayPlacement(cluster.address, namespace, tmp_path / "run", str(tmp_path / "nodes"), config, grace_s=2)
    yield placed
    placed.stop_all()


def answer(ip: str, port: int) -> dict:
    with urllib.request.urlopen(f"http://{ip}:{port}/", timeout=5) as response:
        return json.loads(response.read())


def http_service(name: str, port: int, node: str) -> ServiceSpec:
    argv = [sys.executable, "-c", SERVICE, str(port), "--config", "/driver/only/config.yaml"]
    return ServiceSpec(name, argv, ready=listening("127.0.0.1", port), role="probe",
                       resources=Resources(node=node), restart=RestartPolicy(max_restarts=3, max_backoff_s=1))


@pytest.mark.timeout(300)
def test_services_run_on_the_nodes_their_resources_name(cluster, placement):
    ports = {name: free_port_block(1) for name in ("node_a", "node_b", "node_c")}
    for node, port in ports.items():
        placement.start(http_service(f"probe-{node}", port, node))
    placement.check()
    seen = {}
    for node, port in ports.items():
        state = placement.states[f"probe-{node}"]
        assert state.node_ip == cluster.node(node).ip, f"probe-{node} ran at {state.node_ip}"
        assert state.state == "running"
        seen[node] = answer(state.node_ip, port)  # served from that node's own address
    assert {s["run"] for s in seen.values()} == {"placed-by-ray"}  # the driver's config, carried by the actor
    assert len({s["data_dir"] for s in seen.values()}) == 3  # each node its own data directory
    assert all(s["config"] != "/driver/only/config.yaml" for s in seen.values())
    assert json.loads((placement.run_dir / "state.json").read_text())["services"]["probe-node_b"]["node_ip"] == \
        cluster.node("node_b").ip


@pytest.mark.timeout(300)
def test_a_killed_service_process_is_restarted_by_its_actor(cluster, placement):
    port = free_port_block(1)
    placement.start(http_service("probe-restart", port, "node_c"))
    placement.check()
    first = placement.states["probe-restart"].pid
    os.kill(first, signal.SIGKILL)  # one machine: the namespaces share the process table

    def restarted():
        placement.check()
        state = placement.states["probe-restart"]
        return state.restarts == 1 and state.pid not in (None, first) and state.state == "running"
    wait_until(restarted, 60, "the actor to start the killed process again")
    ip = cluster.node("node_c").ip
    assert wait_until(lambda: _answers(ip, port), 30, f"the restarted service to answer at {ip}:{port}")
    placement.stop_all()
    assert wait_until(lambda: not pid_alive(placement.states["probe-restart"].pid or 0) and not _answers(ip, port),
                      30, "the stopped service to be gone")


@pytest.mark.timeout(300)
def test_a_fenced_exit_on_a_node_ray_counts_is_started_again(cluster, placement, tmp_path):
    """Exit code 3 (fenced) with no replacement by Ray (its node alive): the broker aborted a transaction left
    open too long, so the actor starts the process again. (On a node Ray lost, it does not: tests/e2e/test_ray_loop.)"""
    port, marker = free_port_block(1), tmp_path / "fenced-once"
    spec = http_service("probe-fenced", port, "node_b")
    once = f"import os, sys\nif not os.path.exists({str(marker)!r}):\n    open({str(marker)!r}, 'w').close()\n" \
           f"    sys.exit({FENCED_EXIT_CODE})\n"
    spec.argv[2] = once + SERVICE
    placement.start(spec)  # ready only once started again: the first start exits fenced
    assert marker.exists() and _answers(cluster.node("node_b").ip, port)
    placement.check()
    assert placement.states["probe-fenced"].restarts == 1


def _answers(ip: str, port: int) -> bool:
    try:
        return bool(answer(ip, port))
    except OSError:
        return False


@pytest.mark.timeout(300)
def test_replicas_are_placed_as_copies(cluster, placement):
    spec = ServiceSpec("sleeper", [sys.executable, "-c", "import time; time.sleep(600)"], role="agents",
                       resources=Resources(custom={"node_b": 0.1}), replicas=2)
    for copy in expand_replicas([spec]):
        placement.start(copy)
    placement.check()
    assert {placement.states[n].node_ip for n in ("sleeper-r0", "sleeper-r1")} == {cluster.node("node_b").ip}


@pytest.mark.timeout(300)
def test_a_request_no_node_can_give_is_an_error_before_anything_starts(cluster, placement):
    impossible = ServiceSpec("rollout-gpu", [sys.executable, "-c", "pass"], role="rollout",
                             resources=Resources(cpus=1, gpus=1, custom={"h100": 1}))
    fine = ServiceSpec("fine", [sys.executable, "-c", "import time; time.sleep(600)"])
    with pytest.raises(PlacementError) as failure:
        placement.check_all([fine, impossible])
    message = str(failure.value)
    assert "rollout-gpu asks for CPU 1, GPU 1, h100 1" in message
    for node in cluster.nodes:  # what each node has, by address
        assert node.ip in message and f"{node.name} 1" in message
    assert stop_actors(placement.namespace) == []  # nothing was started


@pytest.mark.timeout(300)
def test_where_the_cluster_adds_nodes_such_a_request_waits_for_one_and_is_removed_when_none_joins(cluster, placement):
    """`cluster.autoscaler` (`node_wait_s`): the request waits as a pending demand (Ray's autoscaler would add a
    node: tests/stack/test_ray_autoscaler.py); this cluster adds none, so after `node_wait_s` its actor is
    removed, leaving no demand behind. A gang is still refused at once (its reservation is all or none)."""
    import dataclasses

    import ray

    said: list[str] = []
    placement.node_wait_s, placement.say = 12.0, said.append  # the actor answers no state query meanwhile
    impossible = ServiceSpec("rollout-gpu", [sys.executable, "-c", "pass"], role="rollout",
                             resources=Resources(cpus=1, gpus=1, custom={"h100": 1}))
    placement.check_all([impossible])  # no error: it would wait
    started = time.monotonic()
    failure: list[BaseException] = []
    waiting = threading.Thread(target=lambda: _failure_of(placement.start, impossible, failure))
    waiting.start()
    def pending() -> dict:  # what `status` shows meanwhile (once Ray registered the actor's name)
        return actor_states(placement.namespace, ["rollout-gpu"])["rollout-gpu"]
    # the state as the query that saw it pending gave it: a second query, seconds later under load, could already
    # find the actor gone after its 12 s (a clean-clone run here did)
    seen = wait_until(lambda: (state := pending())["state"] == "pending" and state, 30,
                      lambda: f"the actor pending: {pending()}")
    assert seen == {"name": "rollout-gpu", "state": "pending", "waiting_for": PENDING}
    waiting.join(60)
    assert isinstance(failure[0], NoNodeJoined), failure
    assert "rollout-gpu: no node that can hold it joined within 12 s" in str(failure[0])
    assert 12 <= time.monotonic() - started < 60
    assert any("rollout-gpu: no node present can hold it; it waits up to 12 s" in line for line in said), said
    with pytest.raises(ValueError):  # the actor is gone, and its demand with it
        ray.get_actor("rollout-gpu", namespace=placement.namespace)
    assert placement.states["rollout-gpu"].state == "failed" and "rollout-gpu" not in placement.actors
    with pytest.raises(PlacementError, match="on each of 2 nodes"):
        placement.check_all([dataclasses.replace(impossible, name="trainer", gang=2)])


def _failure_of(start, spec: ServiceSpec, failure: list[BaseException]) -> None:
    try:
        start(spec)
    except BaseException as exc:  # the test thread's outcome, asserted by the test
        failure.append(exc)


def test_an_unreachable_address_is_one_line_naming_it(tmp_path):
    address = f"127.0.0.1:{free_port()}"
    started = time.monotonic()
    with pytest.raises(PlacementError, match=f"cannot reach the Ray cluster at {address}"):
        RayPlacement(address, "sf-nowhere", tmp_path / "run", str(tmp_path / "nodes"))
    assert time.monotonic() - started < 10


@pytest.mark.timeout(300)
def test_a_service_that_cannot_start_fails_its_start_at_once(cluster, placement):
    broken = ServiceSpec("broken", ["/no/such/program"], ready=listening("127.0.0.1", 1), ready_timeout_s=600,
                         resources=Resources(node="node_b"))
    started = time.monotonic()
    with pytest.raises(StartupFailed, match=f"broken failed on {cluster.node('node_b').ip}"):
        placement.start(broken)
    assert time.monotonic() - started < 60  # not the 600 s readiness timeout

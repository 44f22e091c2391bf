"""What RayPlacement asks Ray for, and the words of a request no node can give, from plain values (no cluster)."""

import pytest

from seamlessflow.stack.ray_placement import PlacementError, actor_options, check_feasible, connect
from seamlessflow.stack.resources import Resources, RestartPolicy
from seamlessflow.stack.supervisor import ServiceSpec

NODES = [{"ip": "10.0.0.1", "resources": {"CPU": 4.0, "memory": 8 * 2**30, "node:10.0.0.1": 1.0, "node_a": 1.0}},
         {"ip": "10.0.0.2", "resources": {"CPU": 2.0, "GPU": 1.0, "h100": 1.0, "node:10.0.0.2": 1.0}}]


def spec(name: str, **resources) -> ServiceSpec:
    return ServiceSpec(name, ["python", "-m", f"services.{name}"], resources=Resources(**resources),
                       restart=RestartPolicy(max_restarts=5))


def test_a_request_some_node_can_give_passes():
    check_feasible([spec("proxy", cpus=4), spec("rollout-0", cpus=1, gpus=1, custom={"h100": 1}),
                    spec("assembler", node="node_a")], NODES)


@pytest.mark.parametrize(("asked", "words"), [
    ({"gpus": 1, "cpus": 4}, "CPU 4, GPU 1"),  # each alone exists, never on one node
    ({"custom": {"a100": 1}}, "a100 1"),
    ({"node": "node_z"}, "node_z 0.001"),
    ({"memory_mb": 16 * 1024}, "memory 16384 MiB"),
])
def test_a_request_no_node_can_give_names_the_service_what_it_asked_and_what_the_nodes_have(asked, words):
    with pytest.raises(PlacementError) as failure:
        check_feasible([spec("proxy"), spec("rollout-1", **asked)], NODES)
    message = str(failure.value)
    assert message.startswith(f"rollout-1 asks for {words}, which no node of the cluster has")
    assert "10.0.0.1: CPU 4, memory 8192 MiB, node_a 1" in message
    assert "10.0.0.2: CPU 2, GPU 1, h100 1" in message


def test_the_actor_asks_for_the_specs_resources_and_restarts_by_its_policy():
    options = actor_options(spec("rollout-1", cpus=1, gpus=1, memory_mb=512, custom={"h100": 1}, node="node_b"),
                            "seamlessflow-g1")
    assert options["name"] == "rollout-1" and options["namespace"] == "seamlessflow-g1"
    assert options["lifetime"] == "detached" and options["max_restarts"] == 5
    assert (options["num_cpus"], options["num_gpus"], options["memory"]) == (1, 1, 512 * 2**20)
    assert options["resources"] == {"h100": 1.0, "node_b": 0.001}


def test_an_address_nothing_answers_at_is_an_error_naming_it():
    with pytest.raises(PlacementError, match="cannot reach the Ray cluster at 127.0.0.1:1"):
        connect("127.0.0.1:1", "seamlessflow-x")
    with pytest.raises(PlacementError, match="cannot reach the Ray cluster at not-an-address"):
        connect("not-an-address", "seamlessflow-x")

"""What RayPlacement asks Ray for, and the words of a request no node can give, from plain values (no cluster)."""

import pytest

from seamlessflow.stack.ray_placement import PlacementError, actor_options, check_feasible, connect, pack_at_once
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


def test_a_gang_needs_as_many_nodes_as_members_that_each_hold_one():
    gang = spec("trainer", cpus=2)
    gang.gang = 2
    check_feasible([gang], NODES)  # both nodes have 2 CPUs
    gang.gang = 3
    with pytest.raises(PlacementError, match="trainer asks for CPU 2 on each of 3 nodes, which only 2 node"):
        check_feasible([gang], NODES)


def test_services_that_each_fit_alone_may_not_fit_together_and_the_one_left_out_is_named():
    """One GPU, two engines: each passes `check_feasible`, placed together the second has no room left."""
    engines = [spec("rollout-0", gpus=1), spec("rollout-1", gpus=1)]
    check_feasible(engines, NODES)
    with pytest.raises(PlacementError, match="rollout-1 asks for GPU 1 on each of 1 node.*10.0.0.2: CPU 2, GPU 0"):
        pack_at_once(engines, NODES)


def test_packing_places_the_largest_first_and_a_gang_on_distinct_nodes():
    gang = spec("trainer", cpus=1)
    gang.gang = 2
    placed = pack_at_once([spec("proxy", cpus=3), gang, spec("rollout-0", cpus=1, gpus=1)], NODES)
    assert placed == {"trainer": ["10.0.0.1", "10.0.0.2"], "rollout-0": ["10.0.0.2"], "proxy": ["10.0.0.1"]}


def test_gang_members_run_the_service_with_their_node_rank_and_member_0s_address():
    from seamlessflow.stack.ray_gang import MASTER_ADDR_ENV, NODE_RANK_ENV, members

    gang = ServiceSpec("trainer", ["python", "-m", "torch.distributed.run", "--nnodes=2", "-m", "services.trainer",
                                   "--config", "/run/config.yaml"], {"X": "1"}, role="trainer", gang=2)
    first, second = members(gang, ["10.0.0.2", "10.0.0.3"])
    assert (first.name, second.name) == ("trainer", "trainer-1") and first.gang == second.gang == 1
    assert first.argv[1:] == ["-m", "services.trainer", "--config", "/run/config.yaml"]  # it starts its launcher
    assert first.env == {"X": "1", NODE_RANK_ENV: "0", MASTER_ADDR_ENV: "10.0.0.2"}
    assert second.env[NODE_RANK_ENV] == "1" and second.env[MASTER_ADDR_ENV] == "10.0.0.2"


def test_a_proxy_goes_to_the_drivers_node_only_when_its_request_does_not_say_where():
    from seamlessflow.stack.ray_placement import placed_by_request

    assert not placed_by_request(Resources(cpus=2))
    assert placed_by_request(Resources(node="node_c")) and placed_by_request(Resources(custom={"sf_worker": 1}))

"""The stack the KubeRay example would start, built by the project's own code from its manifests.

The RayJob's entrypoint is run through the real CLI up to the point where `up --ray` would join the cluster,
so the settings checked are the ones `up` hands to the Ray placement; every service's spec then comes from
`app_services`, and the Ray nodes from the RayCluster's groups the way KubeRay starts them. No Ray cluster and
no Kubernetes: what this cannot show is said in docs/operations/kuberay.md."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from seamlessflow.agents.options import AgentOptions
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.cli.main import cli
from seamlessflow.config import Settings
from seamlessflow.evaluation.options import EvalOptions
from seamlessflow.proxy import ProxyOptions
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.stack.options import ClusterOptions
from seamlessflow.stack.placement_protocol import expand_replicas
from seamlessflow.stack.ray_placement import PlacementError, check_feasible, pack_at_once
from seamlessflow.stack.ray_settings import for_the_cluster
from seamlessflow.stack.services import app_services
from seamlessflow.stack.supervisor import ServiceSpec
from seamlessflow.testing.kuberay import IMAGE_HOME, REPO, config_text, one, ray_nodes
from seamlessflow.tracking.options import TrackingOptions
from seamlessflow.trainer.options import TrainerOptions

# where each role must land (a group of raycluster.yaml, or the head); the rest on the CPU workers
GROUP_OF_ROLE = {"rollout": "gpu", "trainer": "gpu", "dashboard": "head"}


def entrypoint_settings(tmp_path: Path, monkeypatch) -> Settings:
    """The settings `seamlessflow up --ray` builds from the RayJob's entrypoint and the ConfigMap, caught where
    it would join the Ray cluster (the entrypoint's paths moved under tmp_path)."""
    argv = shlex.split(one("RayJob")["spec"]["entrypoint"])
    assert argv[0] == "seamlessflow"
    config = tmp_path / "config.yaml"
    config.write_text(config_text())
    moved = {argv[argv.index("--config") + 1]: str(config), argv[argv.index("--data-dir") + 1]: str(tmp_path)}
    caught: list[Settings] = []
    monkeypatch.setattr("seamlessflow.cli.stack.up_on_ray", lambda settings, *_: caught.append(settings))
    result = CliRunner().invoke(cli, [moved.get(word, word) for word in argv[1:]], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return for_the_cluster(caught[0], "10.0.0.1")  # what up_on_ray does first, once on the head


@pytest.fixture
def stack(tmp_path, monkeypatch) -> Settings:
    """The entrypoint's settings (a name of its own: conftest's `settings` is a broker client's)."""
    return entrypoint_settings(tmp_path, monkeypatch)


def test_the_entrypoint_starts_the_stack_on_the_ray_cluster_against_the_kafka_cluster(stack):
    cluster = ClusterOptions.from_settings(stack)
    assert (cluster.engine, cluster.address) == ("ray", "seamlessflow-head-svc:6379")
    assert stack.bootstrap_servers == "seamlessflow-kafka-bootstrap:9092" and not stack.embedded


def test_every_service_accepts_its_section(stack):
    """Each service validates its own section when it starts: a key misspelt in the ConfigMap would fail on
    the cluster, minutes later, in one service's log. Here it fails now."""
    rollout = RolloutOptions.from_settings(stack)
    assert rollout.model and all(w.cpus is None and w.gpu is None for w in rollout.workers.values())
    trainer = TrainerOptions.from_settings(stack)
    deepspeed = Path(str(trainer.deepspeed))
    assert deepspeed.is_relative_to(IMAGE_HOME) and (REPO / deepspeed.relative_to(IMAGE_HOME)).is_file()
    ProxyOptions.from_settings(stack)
    AssemblerOptions.from_settings(stack)
    AgentOptions.from_settings(stack)
    EvalOptions.from_settings(stack)
    TrackingOptions.from_settings(stack)
    SchedulerOptions.from_settings(stack)
    ManagerOptions.from_settings(stack)


def test_the_pods_environment_gives_engines_and_trainer_their_own_address(tmp_path):
    """The GPU pods set SEAMLESSFLOW_* variables from their pod IP; a service there reads the config file and
    its environment over it, so each engine announces, and the trainer serves weights at, its pod's address."""
    group = next(g for g in one("RayCluster")["spec"]["workerGroupSpecs"] if g["groupName"] == "gpu")
    env = {e["name"]: "10.4.0.7" for e in group["template"]["spec"]["containers"][0]["env"]
           if e["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"}
    assert env and all(name.startswith("SEAMLESSFLOW_") for name in env)
    config = tmp_path / "config.yaml"
    config.write_text(config_text())
    on_the_pod = Settings.load(config, env=env)
    assert RolloutOptions.from_settings(on_the_pod).host == "10.4.0.7"
    trainer = TrainerOptions.from_settings(on_the_pod)
    assert trainer.advertised_weights_host() == "10.4.0.7" and trainer.serves_weights()
    assert trainer.weights_bind == "0.0.0.0"


def _specs(settings: Settings) -> list[ServiceSpec]:
    return expand_replicas(app_services(settings))


def test_the_stack_is_every_service_of_the_loop(stack):
    names = sorted(spec.name for spec in _specs(stack))
    assert names == sorted(["assembler", "tracking", "dashboard", "rollout-0", "rollout-1", "proxy-0", "proxy-1",
                            "trainer", "scheduler", "agents-default-demo-r0", "agents-default-demo-r1", "eval"])


def test_every_service_fits_its_group_and_no_other(stack):
    """`check_feasible`, the check `up --ray` makes before it starts anything, on the nodes each group becomes:
    a role fits its own group's pods and is refused by every other group (so Ray cannot put it elsewhere)."""
    nodes = ray_nodes(one("RayCluster"))
    for spec in _specs(stack):
        home = GROUP_OF_ROLE.get(spec.role, "cpu")
        check_feasible([spec], nodes[home])
        for group, others in nodes.items():
            if group != home:
                with pytest.raises(PlacementError):
                    check_feasible([spec], others)


def test_the_whole_stack_fits_the_cluster_at_once(stack):
    """`check_feasible` looks at one service at a time; `pack_at_once` places them all on the groups' pods, each
    resource counted down, as Ray would have to hold them together."""
    nodes = [node for group in ray_nodes(one("RayCluster")).values() for node in group]
    placed = {name: ips[0] for name, ips in pack_at_once(_specs(stack), nodes).items()}
    assert len({placed["rollout-0"], placed["rollout-1"], placed["trainer"]}) == 3  # a GPU each
    assert placed["proxy-0"] != placed["proxy-1"]  # one per CPU worker, behind the proxy Service

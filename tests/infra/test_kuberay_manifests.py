"""The KubeRay example's manifests name only kinds, keys and images that exist, and their names fit together.

No Kubernetes cluster runs here (no image can be pulled on these machines): each manifest is validated against
its kind's schema from KubeRay's and Strimzi's own CRDs (vendored, tests/fixtures/k8s_schemas/README.md), with
unknown keys an error as `kubectl apply --validate=strict` makes them, plus the rules KubeRay's webhook-free
validation adds in Go (ray-operator/controllers/ray/utils/validation.go at v1.7.0)."""

from __future__ import annotations

import importlib.metadata
import re
import shlex
import sys
from pathlib import Path

import jsonschema
import pytest

from seamlessflow.testing.kuberay import EXAMPLE, SCHEMA_FILES, config_text, manifests, one, schema_for

SCHEMAS = Path(__file__).resolve().parents[1] / "fixtures" / "k8s_schemas"
PLACEHOLDER = re.compile(r"^your-registry\.example/seamlessflow:ray(?P<ray>[0-9.]+)-py(?P<py>\d+)-gpu$")


def _docs() -> list:
    return [pytest.param(doc, id=f"{name}:{doc['kind']}/{doc['metadata']['name']}") for name, doc in manifests()]


def test_the_example_holds_each_kind_it_needs():
    kinds = sorted(doc["kind"] for _, doc in manifests())
    assert kinds == ["ConfigMap", "Kafka", "KafkaNodePool", "RayCluster", "RayJob", "Service"]


@pytest.mark.parametrize("doc", _docs())
def test_each_manifest_is_valid_for_its_kind(doc):
    assert (doc["apiVersion"], doc["kind"]) in SCHEMA_FILES, f"{doc['apiVersion']} {doc['kind']}: no such kind here"
    jsonschema.validate(doc, schema_for(SCHEMAS, doc["apiVersion"], doc["kind"]), cls=jsonschema.Draft7Validator)


@pytest.mark.parametrize(("path", "value"), [
    (("spec", "workerGroupSpec"), []),  # a misspelt key (workerGroupSpecs)
    (("spec", "headGroupSpec", "rayStartParams", "num-cpus"), 0),  # rayStartParams are strings
    (("spec", "headGroupSpec", "template", "spec", "containers", 0, "resource"), {}),  # deep in the pod spec
])
def test_the_schema_check_catches_what_kubectl_would_refuse(path, value):
    cluster = one("RayCluster")
    node = cluster
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(cluster, schema_for(SCHEMAS, "ray.io/v1", "RayCluster"), cls=jsonschema.Draft7Validator)


def test_kuberays_own_rules_hold():
    """What KubeRay checks in code: a group's resources either in rayStartParams or in `resources`, never both;
    no `labels` in rayStartParams; a RayJob on an existing cluster names it and does not retry."""
    cluster = one("RayCluster")
    groups = [cluster["spec"]["headGroupSpec"], *cluster["spec"]["workerGroupSpecs"]]
    for group in groups:
        params = group.get("rayStartParams") or {}
        assert not (group.get("resources") and {"num-cpus", "num-gpus", "memory", "resources"} & set(params))
        assert "labels" not in params
    job = one("RayJob")["spec"]
    assert job["clusterSelector"] == {"ray.io/cluster": cluster["metadata"]["name"]}
    assert job.get("backoffLimit", 0) == 0 and job.get("submissionMode") != "SidecarMode"


def _containers(doc: dict) -> list[dict]:
    spec = doc.get("spec", {})
    groups = [spec["headGroupSpec"], *spec["workerGroupSpecs"]] if doc["kind"] == "RayCluster" else []
    return [c for group in groups for c in group["template"]["spec"]["containers"]]


def test_every_image_is_the_one_built_from_the_dockerfile_on_rays_own_image():
    """Ray publishes `rayproject/ray:<version>-py<XY>-gpu`; the version is the one the project pins and runs
    here, and so is the Python. The project's image does not exist anywhere: a placeholder
    docs/operations/kuberay.md explains."""
    ray, py = importlib.metadata.version("ray"), f"{sys.version_info.major}{sys.version_info.minor}"
    base = re.findall(r"^FROM (\S+)", (EXAMPLE / "Dockerfile").read_text(), flags=re.M)
    assert base == [f"rayproject/ray:{ray}-py{py}-gpu"]
    images = {c["image"] for _, doc in manifests() for c in _containers(doc)}
    assert len(images) == 1
    match = PLACEHOLDER.match(images.pop())
    assert match and match["ray"] == ray and match["py"] == py
    assert one("RayCluster")["spec"]["rayVersion"] == ray


def entrypoint() -> list[str]:
    return shlex.split(one("RayJob")["spec"]["entrypoint"])


def _option(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_the_names_fit_together():
    """The addresses the entrypoint and the config use are the Services the manifests make: KubeRay's
    `<cluster>-head-svc` (its ports: the head container's), Strimzi's `<kafka>-kafka-bootstrap`, the proxy
    Service in front of the CPU workers, and the ConfigMap mounted where --config looks."""
    import yaml

    cluster, kafka, argv = one("RayCluster"), one("Kafka"), entrypoint()
    head = cluster["spec"]["headGroupSpec"]["template"]["spec"]
    head_ports = {p["containerPort"] for p in head["containers"][0]["ports"]}
    assert _option(argv, "--ray") == f"{cluster['metadata']['name']}-head-svc:6379" and 6379 in head_ports
    plain = next(listener for listener in kafka["spec"]["kafka"]["listeners"] if not listener["tls"])
    assert _option(argv, "--bootstrap-servers") == f"{kafka['metadata']['name']}-kafka-bootstrap:{plain['port']}"
    mount = head["containers"][0]["volumeMounts"][0]
    volume = next(v for v in head["volumes"] if v["name"] == mount["name"])
    assert volume["configMap"]["name"] == one("ConfigMap")["metadata"]["name"]
    assert _option(argv, "--config") == f"{mount['mountPath']}/config.yaml"
    config, service = yaml.safe_load(config_text()), one("Service")
    assert config["agents"]["proxy_url"] == f"http://{service['metadata']['name']}:{config['proxy']['port']}"
    assert service["spec"]["ports"][0]["targetPort"] == config["proxy"]["port"]
    assert config["dashboard"]["port"] in head_ports


def test_the_proxy_service_selects_the_pods_that_run_proxies():
    """KubeRay labels each pod `ray.io/cluster` and `ray.io/group`; the group selected offers the proxies' own
    resource, one proxy per pod, and declares the proxies' port."""
    import yaml

    cluster, selector = one("RayCluster"), one("Service")["spec"]["selector"]
    assert selector["ray.io/cluster"] == cluster["metadata"]["name"]
    group = next(g for g in cluster["spec"]["workerGroupSpecs"] if g["groupName"] == selector["ray.io/group"])
    config = yaml.safe_load(config_text())
    assert config["cluster"]["resources"]["proxy"]["custom"]["sf_proxy"] == 1 == int(group["resources"]["sf_proxy"])
    assert group["replicas"] == config["proxy"]["workers"]
    ports = {p["containerPort"] for p in group["template"]["spec"]["containers"][0]["ports"]}
    assert config["proxy"]["port"] in ports

"""The KubeRay example (infra/examples/kuberay/) read the way Kubernetes and KubeRay read it, without a cluster:
its manifests, each kind's schema from the operator's own CRD (vendored by the tests, passed in here), and the
Ray node each worker group becomes (KubeRay's rules for `ray start`'s resources, ray-operator/controllers/ray/
common/pod.go at v1.7.0). Shared by the example's tests; nothing here runs in the stack."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "infra" / "examples" / "kuberay"
IMAGE_HOME = "/home/ray/seamlessflow"  # where the example's Dockerfile puts the project in the image
SCHEMA_FILES = {
    ("ray.io/v1", "RayCluster"): "rayclusters.ray.io.json",
    ("ray.io/v1", "RayJob"): "rayjobs.ray.io.json",
    ("kafka.strimzi.io/v1", "Kafka"): "kafkas.kafka.strimzi.io.json",
    ("kafka.strimzi.io/v1", "KafkaNodePool"): "kafkanodepools.kafka.strimzi.io.json",
    ("v1", "Service"): "services.json",
    ("v1", "ConfigMap"): "configmaps.json",
}
# the top level's ObjectMeta, which CRDs leave as a bare object: the fields a manifest may set
METADATA = {"type": "object", "additionalProperties": False, "required": ["name"],
            "properties": {"name": {"type": "string", "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"},
                           "namespace": {"type": "string"},
                           "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                           "annotations": {"type": "object", "additionalProperties": {"type": "string"}}}}


def manifests() -> list[tuple[str, dict]]:
    """Every document of every manifest file, with the file it came from."""
    return [(path.name, doc) for path in sorted(EXAMPLE.glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text()) if doc]


def one(kind: str) -> dict:
    found = [doc for _, doc in manifests() if doc["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def strict(schema: Any) -> Any:
    """The schema as the API server applies it with strict field validation (`kubectl apply --validate=strict`):
    a key that no `properties` names is an error, not silently pruned, unless the schema keeps unknown fields."""
    if isinstance(schema, list):
        return [strict(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    out = {key: strict(value) for key, value in schema.items()}
    if "properties" in out and "additionalProperties" not in out \
            and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def schema_for(schemas: Path, api_version: str, kind: str) -> dict:
    """The kind's schema from the folder of vendored schemas, strict, with the top level's metadata spelt out."""
    vendored = json.loads((schemas / SCHEMA_FILES[(api_version, kind)]).read_text())
    schema = strict(vendored["openAPIV3Schema"])
    schema["properties"]["metadata"] = METADATA
    schema.setdefault("required", [])
    schema["required"] = sorted({*schema["required"], "apiVersion", "kind", "metadata"})
    return schema


_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30,
           "Ti": 2**40}


def quantity(text: str | int | float) -> float:
    """A Kubernetes resource quantity ("500m", "64Gi", "8") as a number."""
    match = re.fullmatch(r"([0-9.]+)([a-zA-Z]*)", str(text))
    assert match and match.group(2) in _SUFFIX, f"not a quantity: {text!r}"
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _is_gpu_key(name: str) -> bool:
    """KubeRay's utils.IsGPUResourceKey: any name ending in "gpu", and MIG slices."""
    return name.endswith("gpu") or re.search(r"nvidia\.com/mig-\d+g\.\d+gb$", name) is not None


def ray_resources(group: dict, head: bool = False) -> dict[str, float]:
    """What `ray start` offers on a pod of this group: the group's `resources` (CPU, memory, GPU-like names,
    else custom), else rayStartParams, then the container's limits (CPU rounded up, memory, nvidia.com/gpu)."""
    params = dict(group.get("rayStartParams") or {})
    custom: dict[str, float] = json.loads(params["resources"].strip("'\"` ")) if "resources" in params else {}
    for name, amount in (group.get("resources") or {}).items():
        low = name.lower()
        key = {"cpu": "num-cpus", "memory": "memory"}.get(low, "num-gpus" if _is_gpu_key(low) else None)
        if key:
            params[key] = str(int(quantity(amount)))
        else:
            custom[name] = quantity(amount)
    limits = group["template"]["spec"]["containers"][0].get("resources", {})
    limits, requests = limits.get("limits", {}), limits.get("requests", {})
    cpu = params.get("num-cpus") or limits.get("cpu") or requests.get("cpu") or 0
    out = {"CPU": float(-(-quantity(cpu) // 1)), **custom}
    if "memory" in params or "memory" in limits:
        out["memory"] = quantity(params.get("memory") or limits["memory"])
    gpus = params.get("num-gpus") or next((v for k, v in limits.items() if _is_gpu_key(k)), 0)
    out["GPU"] = quantity(gpus)
    if head:
        out["node:__internal_head__"] = 1.0
    return {name: amount for name, amount in out.items() if amount > 0}


def ray_nodes(cluster: dict) -> dict[str, list[dict[str, Any]]]:
    """The Ray nodes of a RayCluster by group ("head" and each worker group), in `node_table()`'s shape: one
    per pod, at the size the group's `replicas` asks for."""
    head = cluster["spec"]["headGroupSpec"]
    nodes = {"head": [{"ip": "head", "resources": ray_resources(head, head=True)}]}
    for group in cluster["spec"]["workerGroupSpecs"]:
        nodes[group["groupName"]] = [{"ip": f"{group['groupName']}-{i}", "resources": ray_resources(group)}
                                     for i in range(group.get("replicas", 1))]
    return nodes


def config_text() -> str:
    return one("ConfigMap")["data"]["config.yaml"]

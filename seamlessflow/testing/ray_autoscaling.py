"""A Ray cluster on one machine whose nodes Ray's own autoscaler adds and removes: a head started with Ray's
fake multi-node provider (`ray.autoscaler._private.fake_multi_node`), the provider Ray's own autoscaler tests use.

Why this provider: it is Ray's real autoscaler (the monitor on the head, its scheduler of pending demands, its
idle timeout) with a node provider that starts a node as local raylet processes instead of a cloud VM. So a
service asking for a resource that only a node type has becomes a pending demand, the autoscaler launches a
node of that type, the service runs there, and the node is terminated once it has been idle for
`idle_timeout_s`. What it does not give: addresses of their own (every node is this machine, one IP) and a
filesystem of their own, which the namespace cluster (`ray_cluster.py`) gives and this provider cannot.

The head is a `ray start --block` stopped by its pid, and the nodes the autoscaler started by the cluster's
temp dir in their command lines; never `ray stop`, which would stop every Ray process on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from seamlessflow.ports import free_port_block
from seamlessflow.testing.ray_cluster import RAY, REPO, _stop_marked, alive_nodes
from seamlessflow.testing.waiting import wait_until


@dataclass
class AutoscalingCluster:
    address: str  # the head's GCS, host:port
    root: Path  # the head's temp dir and config; every node's processes name it

    def alive(self) -> int:
        return alive_nodes(self.address)


def autoscaling_config(head: str, head_cpus: int, node_types: dict[str, dict[str, float]],
                       idle_timeout_s: float) -> dict:
    """The cluster config of Ray's fake multi-node provider: the head (no room for anything but `head_cpus`)
    and each node type of `node_types` (its resources, at most one node of it)."""
    types: dict = {"ray.head.default": {"resources": {"CPU": head_cpus}, "node_config": {}, "max_workers": 0}}
    for name, resources in node_types.items():
        types[name] = {"resources": resources, "node_config": {}, "min_workers": 0, "max_workers": 1}
    return {"cluster_name": "seamlessflow-fake", "max_workers": len(node_types),
            "provider": {"type": "fake_multinode", "use_node_id_as_ip": True, "disable_node_updaters": True,
                         "disable_launch_config_check": True, "gcs_address": head},
            "available_node_types": types, "head_node_type": "ray.head.default", "auth": {},
            "upscaling_speed": 1.0, "idle_timeout_minutes": idle_timeout_s / 60, "docker": {},
            "initialization_commands": [], "setup_commands": [], "head_setup_commands": [],
            "worker_setup_commands": [], "head_start_ray_commands": [], "worker_start_ray_commands": [],
            "file_mounts": {}, "cluster_synced_files": [], "file_mounts_sync_continuously": False,
            "rsync_exclude": [], "rsync_filter": []}


def _this_ip() -> str:
    """The address Ray's fake nodes take (the provider gives them no other): this machine's, as Ray finds it."""
    from ray._private.services import get_node_ip_address

    return str(get_node_ip_address())


@contextmanager
def autoscaling_ray_cluster(node_types: dict[str, dict[str, float]], head_cpus: int = 2,
                            idle_timeout_s: float = 6.0) -> Iterator[AutoscalingCluster]:
    """A head whose autoscaler adds a node of a type in `node_types` for a demand no present node can hold, and
    terminates it after `idle_timeout_s` idle. The autoscaler looks every second (Ray's default: 5 s)."""
    root = Path(tempfile.mkdtemp(prefix="sf-ray-autoscaling-"))
    ip, port = _this_ip(), free_port_block(1)
    cluster = AutoscalingCluster(f"{ip}:{port}", root)
    config = root / "autoscaling.json"
    config.write_text(json.dumps(autoscaling_config(cluster.address, head_cpus, node_types, idle_timeout_s)))
    env = {**os.environ, "PYTHONPATH": str(REPO), "RAY_USAGE_STATS_ENABLED": "0", "RAY_FAKE_CLUSTER": "1",
           "AUTOSCALER_UPDATE_INTERVAL_S": "1"}
    argv = [RAY, "start", "--head", "--block", f"--port={port}", f"--node-ip-address={ip}",
            f"--num-cpus={head_cpus}", "--include-dashboard=false", "--disable-usage-stats",
            f"--autoscaling-config={config}", f"--temp-dir={root / 'ray'}"]
    with open(root / "head.log", "ab") as log:
        head = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)
    try:
        wait_until(lambda: cluster.alive() >= 1, 120, "the Ray head", every_s=1, alive=[head])
        yield cluster
    finally:
        from seamlessflow.stack.processes import stop_tree

        stop_tree(head.pid, 15)
        head.wait(10)
        _stop_marked(str(root))
        shutil.rmtree(root, ignore_errors=True)

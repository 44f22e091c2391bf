"""A two-node trainer placed by Ray as a gang (slow: a real 3-node Ray cluster in network namespaces, real
DeepSpeed on CPU under torch's launcher on each node; root only).

`up --ray` with `trainer.nnodes: 2`: Ray reserves one bundle per node in a placement group (STRICT_SPREAD), each
member runs its node's launcher with its node rank and member 0's address as the rendezvous, so the two ranks
form one gloo group across the nodes' addresses. No directory is shared: each node sees only its own under
`cluster.node_data_dir`, checkpoints go to an S3-compatible store, versions are served over HTTP from member 0's
node. `down` stops both and releases the reservation.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import WeightVersion
from seamlessflow.ports import free_port, free_port_block
from seamlessflow.stack.services import SERVICES
from seamlessflow.testing.object_store import object_store
from seamlessflow.testing.ray_cluster import can_make_namespaces, ray_cluster
from seamlessflow.testing.trainer_records import group, wait_for
from seamlessflow.topics import Topics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200),
              pytest.mark.skipif(bool(can_make_namespaces()), reason=can_make_namespaces() or "")]


def sf(config, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "seamlessflow", "--config", str(config), *args],
                          capture_output=True, text=True, timeout=timeout)


def test_a_two_node_trainer_is_placed_as_a_gang_trains_across_the_nodes_and_down_releases_it(tmp_path,
                                                                                             tiny_model_dir):
    with ray_cluster(node_dir=tmp_path / "nodes", cpus={"node_a": 0}) as cluster, \
            object_store(cluster.node("node_a").ip) as store:
        config = tmp_path / "stack.yaml"
        config.write_text(yaml.safe_dump({
            "data_dir": str(tmp_path / "driver"), "broker_port": free_port_block(2), "stop_grace_s": 5,
            "services": {name: name == "trainer" for name in SERVICES}, "metrics": {"port": free_port_block(2)},
            "trainer": {"model_path": str(tiny_model_dir), "group_size": 2, "batch_threshold": 2,
                        "heartbeat_s": 1.0, "nnodes": 2, "ranks": 1, "master_port": free_port(),
                        "checkpoint_uri": store.make_bucket("checkpoints") + "/gang",
                        "checkpoint_storage": store.storage_options()},
            "cluster": {"node_data_dir": str(tmp_path / "nodes")}}))
        up = sf(config, "up", "--ray", cluster.address, "--detach")
        assert up.returncode == 0, up.stdout + up.stderr
        try:
            status = json.loads(sf(config, "status", "--json").stdout)
            nodes = {s["name"]: s["node_ip"] for s in status["services"] if s["name"].startswith("trainer")}
            assert sorted(nodes.values()) == sorted([cluster.node("node_b").ip, cluster.node("node_c").ip]), nodes
            settings = Settings(bootstrap_servers=status["bootstrap_servers"])
            codec, topics = codec_for(settings), Topics(settings)
            producer = MessageProducer(settings, codec)
            for record in group(tiny_model_dir, "g1") + group(tiny_model_dir, "g2"):
                producer.send(topics.trajectories, record.group_id, record)
            producer.flush()
            (version,) = wait_for(settings, codec, topics.weights,
                                  lambda m: isinstance(m, WeightVersion) and m.version == 1, 600)
            assert version.uri.startswith(f"http://{nodes['trainer']}:"), version.uri
            logs = {path.name: path.read_text() for path in tmp_path.glob("nodes*/*/logs/trainer*.log")}
            assert "1 rank(s)" not in logs["trainer.log"] and "2 rank(s)" in logs["trainer.log"], logs
        finally:
            down = sf(config, "down")
        assert down.returncode == 0 and "stopped 3 actor(s)" in down.stdout, down.stdout + down.stderr
        _no_reservation_left(cluster.address, status["placement"]["namespace"])


def _no_reservation_left(address: str, namespace: str) -> None:
    """Asked of the cluster by a driver of its own (in a child: this process stays free of Ray's state)."""
    script = ("import ray, sys; ray.init(address=sys.argv[1], namespace=sys.argv[2], log_to_driver=False); "
              "print(sorted(g['state'] for g in ray.util.placement_group_table().values()))")
    out = subprocess.run([sys.executable, "-c", script, address, namespace], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert "'CREATED'" not in out.stdout, out.stdout

"""A trainer group of two "nodes" with no directory in common: each node's part of a checkpoint reaches the
object store, and after kill -9 of both and their disks wiped, the group resumes from the store.

Real parts: the broker, two launchers of torch's elastic launcher (`nnodes: 2`, one rank each, node ranks 0
and 1, rendezvous on this machine), each with a `data_dir` of its own, real DeepSpeed (ZeRO-1, gloo), and an
S3-compatible store (moto's server). Node 1's optimizer shard is written only on node 1's disk: finding it
in the store shows that node uploaded its part.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import uuid

import psutil
import pytest

from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import ControlCommand, WeightVersion
from seamlessflow.ports import free_port
from seamlessflow.storage import CheckpointStore
from seamlessflow.testing.object_store import object_store
from seamlessflow.testing.trainer_records import group, wait_for
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions

pytestmark = pytest.mark.slow

SHARD = "zero_pp_rank_{}_mp_rank_00_optim_states.pt"


def start_node(config_path, log_path) -> subprocess.Popen:
    log = open(log_path, "ab")
    return subprocess.Popen([sys.executable, "-m", "services.trainer", "--config", str(config_path)],
                            stdout=log, stderr=log, env={**os.environ, "PYTHONUNBUFFERED": "1"})


def kill_9(node: subprocess.Popen) -> None:
    """The launcher and every rank under it, as a node lost would lose them."""
    for process in [*psutil.Process(node.pid).children(recursive=True), psutil.Process(node.pid)]:
        try:
            process.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    node.wait(timeout=30)


@pytest.mark.timeout(330)
def test_each_node_uploads_its_part_and_the_group_resumes_from_the_store_on_empty_disks(settings, codec,
                                                                                         tiny_model_dir, tmp_path):
    with object_store() as s3:
        uri = s3.make_bucket("checkpoints") + "/group"
        store = CheckpointStore(uri, s3.storage_options())
        trainer = {"enabled": True, "model_path": str(tiny_model_dir), "group_size": 2, "batch_threshold": 2,
                   "heartbeat_s": 1.0, "ranks": 1, "nnodes": 2, "master_addr": "127.0.0.1",
                   "master_port": free_port(), "checkpoint_uri": uri, "checkpoint_storage": s3.storage_options()}
        base = settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:10]}", partitions={"trajectories": 1})
        ensure_topics(base)
        nodes = [base.with_overrides(data_dir=tmp_path / f"node{n}", trainer={**trainer, "node_rank": n})
                 for n in (0, 1)]
        configs = [node.dump_yaml(tmp_path / f"node{n}.yaml") for n, node in enumerate(nodes)]
        topics = Topics(base)
        producer = MessageProducer(base, codec)
        g1, g2, g3, g4, g5, g6 = (group(tiny_model_dir, f"g{i}") for i in range(1, 7))
        for record in g1 + g2 + g3 + g4:
            producer.send(topics.trajectories, record.group_id, record)
        producer.flush()

        running = [start_node(configs[n], tmp_path / f"node{n}-run1.log") for n in (0, 1)]
        try:
            wait_for(base, codec, topics.weights, lambda x: isinstance(x, WeightVersion) and x.version == 2, 240)
            wait_until(lambda: "checkpoint at step 2 " in (tmp_path / "node0-run1.log").read_text(errors="replace"),
                       60, "a checkpoint at step 2", every_s=0.05)
        finally:
            for node in running:
                kill_9(node)
        tag = store.latest()
        assert tag is not None and tag.startswith("step00000002-")  # -<the leader process's incarnation>
        local = [TrainerOptions.from_settings(node).checkpoint_dir(node) / tag for node in nodes]
        assert (local[1] / SHARD.format(1)).exists() and not (local[0] / SHARD.format(1)).exists()
        assert {SHARD.format(0), SHARD.format(1)} <= {p.rsplit("/", 1)[-1] for p in store.fs.find(
            store._path(tag))}
        for n in (0, 1):
            shutil.rmtree(tmp_path / f"node{n}")  # both disks gone

        for record in g5 + g6:
            producer.send(topics.trajectories, record.group_id, record)
        producer.flush()
        running = [start_node(configs[n], tmp_path / f"node{n}-run2.log") for n in (0, 1)]
        try:
            wait_for(base, codec, topics.weights, lambda x: isinstance(x, WeightVersion) and x.version == 4, 240)
            producer.send_and_wait(topics.control, "trainer-0",
                                   ControlCommand("stop", "trainer-0", 1, "shutdown", "default", "default", 0))
            assert [node.wait(timeout=120) for node in running] == [0, 0]
        finally:
            for node in running:
                if node.poll() is None:
                    kill_9(node)

    assert "at step 2, version 2" in (tmp_path / "node0-run2.log").read_text()
    restored = TrainerOptions.from_settings(nodes[1]).checkpoint_dir(nodes[1]) / tag
    assert (restored / "mp_rank_00_model_states.pt").exists()  # node 0's part: node 1 restored from the store
    work = TrainerOptions.from_settings(nodes[0]).work_dir(nodes[0])
    steps = [json.loads(line) for line in (work / "steps.jsonl").read_text().splitlines()]
    trained = [tid for s in steps for tid in s["trajectory_ids"]]
    assert sorted(trained) == sorted(r.event_id for r in g1 + g2 + g3 + g4 + g5 + g6)  # each exactly once
    assert [(s["step"], s["version"]) for s in steps] == [(1, 1), (2, 2), (3, 4)]

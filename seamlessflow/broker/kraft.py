"""The embedded broker: Apache Kafka in KRaft mode, one or three nodes on this machine.

Each node is broker and controller at once (`process.roles=broker,controller`), with a static controller
quorum; data lives in `<data-dir>/kafka/node-N/`. `prepare` writes each node's `server.properties` and
formats its storage once; `node_processes` are the commands the supervisor (or `LocalBroker`) runs. The
same configuration serves one node or three: replication factor min(3, nodes) and `min.insync.replicas`
min(2, RF) are the cluster's defaults, which declared topics inherit.
"""

from __future__ import annotations

import base64
import os
import shlex
import subprocess
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from seamlessflow.broker.class_archive import share_options
from seamlessflow.broker.jars import KAFKA_INFRA, libs_dir, missing_jars
from seamlessflow.broker.java import java_binary
from seamlessflow.config import Settings

HEAP = ["-Xms128m", "-Xmx512m"]
JVM_OPTIONS = ["-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20", "-XX:+ExitOnOutOfMemoryError", "-Djava.awt.headless=true"]


@dataclass(frozen=True)
class Node:
    node_id: int
    port: int
    controller_port: int
    root: Path

    @property
    def properties(self) -> Path:
        return self.root / "server.properties"

    @property
    def formatted(self) -> bool:
        return (self.root / "data" / "meta.properties").is_file()


@dataclass
class ProcessSpec:
    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def kafka_dir(settings: Settings) -> Path:
    return Path(settings.data_dir).resolve() / "kafka"


def nodes(settings: Settings) -> list[Node]:
    first_controller = settings.controller_port or settings.broker_port + settings.brokers
    return [Node(i + 1, settings.broker_port + i, first_controller + i, kafka_dir(settings) / f"node-{i + 1}")
            for i in range(settings.brokers)]


def server_properties(node: Node, cluster: list[Node], host: str = "127.0.0.1") -> dict[str, str]:
    """A node's configuration; `host` is where clients reach it (the controllers stay on loopback: the
    embedded nodes all run on one machine)."""
    replicas = min(3, len(cluster))
    in_sync = min(2, replicas)
    return {
        "process.roles": "broker,controller",
        "node.id": str(node.node_id),
        "controller.quorum.voters": ",".join(f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in cluster),
        "listeners": f"PLAINTEXT://{host}:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}",
        "advertised.listeners": f"PLAINTEXT://{host}:{node.port}",
        "controller.listener.names": "CONTROLLER",
        "inter.broker.listener.name": "PLAINTEXT",
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
        "log.dirs": str(node.root / "data"),
        "default.replication.factor": str(replicas),
        "min.insync.replicas": str(in_sync),
        "offsets.topic.replication.factor": str(replicas),
        "offsets.topic.num.partitions": "8",  # 50 by default: slow to create on a laptop, plenty here
        "transaction.state.log.replication.factor": str(replicas),
        "transaction.state.log.min.isr": str(in_sync),
        "transaction.state.log.num.partitions": "4",
        # a role writer frozen with a transaction open holds its partitions' readers back until the abort
        # (seamlessflow.kafka.fencing): look for timed-out transactions every second, not every 10 s
        "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
        "share.coordinator.state.topic.replication.factor": str(replicas),
        "share.coordinator.state.topic.min.isr": str(in_sync),
        "group.initial.rebalance.delay.ms": "0",  # a consumer group forms as soon as its members join
        # the controller's no-op record when nothing else is written: every 500 ms by default, which kept an idle
        # node's raft I/O and controller threads at ~60 % of its CPU (2.6 against 7.1 CPU-s in 90 s idle, thread
        # by thread); every 10 s, liveness is still the brokers' heartbeats
        "metadata.max.idle.interval.ms": "10000",
        "log.flush.interval.ms": "1000",  # a power cut loses at most ~1 s of a single node's appends
        "num.partitions": "1",
    }


def cluster_id(settings: Settings) -> str:
    """One id per data directory, kept across restarts (formatting needs it, and every node shares it)."""
    path = kafka_dir(settings) / "cluster.id"
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(new_cluster_id())
    return path.read_text().strip()


def new_cluster_id() -> str:
    """A random Kafka cluster id (base64url of 16 bytes). Never one starting with '-': the storage tool
    would read it as an option (1 id in 64)."""
    while True:
        cid = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cid.startswith("-"):
            return cid


def layout_mark(cluster: list[Node]) -> str:
    return ",".join(f"{n.node_id}@{n.port}/{n.controller_port}" for n in cluster)


def prepare(settings: Settings) -> list[Node]:
    """Writes every node's properties and formats the storage of nodes that have none (all at once)."""
    if missing_jars():
        raise RuntimeError(f"Kafka's jars are not installed in {libs_dir()}: run `make install` "
                           "(or `python -m seamlessflow.broker.jars install`)")
    cluster = nodes(settings)
    mark = kafka_dir(settings) / "layout"
    if mark.exists() and mark.read_text() != layout_mark(cluster):
        raise RuntimeError(f"{kafka_dir(settings)} holds a Kafka cluster laid out as {mark.read_text()}, not "
                           f"{layout_mark(cluster)}: use the same --brokers and ports, or another --data-dir")
    for node in cluster:
        node.root.mkdir(parents=True, exist_ok=True)
        properties = server_properties(node, cluster, settings.broker_host)
        node.properties.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    formats = [subprocess.Popen(java_command("kafka.tools.StorageTool", "format", "-t", cluster_id(settings),
                                             "-c", str(n.properties), "--ignore-formatted"),
                                stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
               for n in cluster if not n.formatted]
    for proc in formats:
        out, _ = proc.communicate(timeout=120)
        if proc.returncode:
            raise RuntimeError(f"formatting Kafka storage failed: {out.decode(errors='replace')[-2000:]}")
    mark.write_text(layout_mark(cluster))
    return cluster


def java_command(main_class: str, *args: str) -> list[str]:
    """A JVM running one of Kafka's main classes, its classes mapped from the install's archive where there is
    one (`class_archive`); SEAMLESSFLOW_BROKER_JVM_OPTIONS adds options after ours (the test suite's brokers
    live seconds to minutes, so it asks for C1 only: about half the CPU of a start)."""
    extra = shlex.split(os.environ.get("SEAMLESSFLOW_BROKER_JVM_OPTIONS", ""))
    dumping = any(option.startswith("-XX:ArchiveClassesAtExit") for option in extra)
    shared = [] if dumping else share_options()
    logging = f"-Dlog4j2.configurationFile={KAFKA_INFRA / 'log4j2.properties'}"
    return [java_binary(), *HEAP, *JVM_OPTIONS, *shared, *extra, logging, "-cp", str(libs_dir() / "*"),
            main_class, *args]


def node_processes(settings: Settings) -> list[ProcessSpec]:
    """The broker processes, in start order (none when pointing at a real cluster); `prepare` first."""
    if not settings.embedded:
        return []
    return [ProcessSpec(f"broker-{n.node_id}" if settings.brokers > 1 else "broker",
                        java_command("kafka.Kafka", str(n.properties))) for n in nodes(settings)]

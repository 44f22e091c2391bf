"""Topic creation (idempotent) and broker readiness checks with a real client call."""

from __future__ import annotations

import socket
import time

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from seamlessflow.config import Settings
from seamlessflow.kafka.clients import common_config
from seamlessflow.topics import TopicSpec, topic_specs


def admin_client(settings: Settings) -> AdminClient:
    return AdminClient(common_config(settings))


def brokers(settings: Settings, timeout_s: float = 2.0) -> list[dict]:
    """Every broker the cluster reports, with the active controller marked; [] when unreachable: at once when
    nothing listens at any bootstrap address, else after `timeout_s` (a listening broker that is slow to answer
    on a loaded machine is given the time: with 1 s, `status` called a live broker unreachable under load, in a
    run of the Ray loop's test)."""
    if not any(_port_open(address) for address in settings.kafka_bootstrap.split(",")):
        return []
    try:
        meta = admin_client(settings).list_topics(timeout=timeout_s)
    except KafkaException:
        return []
    return [{"id": b.id, "address": f"{b.host}:{b.port}", "controller": b.id == meta.controller_id}
            for b in sorted(meta.brokers.values(), key=lambda b: b.id)]


def cluster_ready(settings: Settings, brokers: int, timeout_s: float = 2.0) -> bool:
    """True once `brokers` brokers are registered and a controller is known (KRaft quorum formed)."""
    if not any(_port_open(address) for address in settings.kafka_bootstrap.split(",")):
        return False  # not even listening: no client (and no screenful of connection-refused logs) yet
    try:
        meta = admin_client(settings).list_topics(timeout=timeout_s)
    except KafkaException:
        return False
    return len(meta.brokers) >= brokers and meta.controller_id >= 0


def _port_open(address: str) -> bool:
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=0.5):
            return True
    except (OSError, ValueError):
        return False


def wait_for_cluster(settings: Settings, brokers: int, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not cluster_ready(settings, brokers):
        if time.monotonic() > deadline:
            raise TimeoutError(f"{brokers} Kafka broker(s) did not answer at {settings.kafka_bootstrap} "
                               f"within {timeout_s:.0f} s")
        time.sleep(0.2)


def ensure_topics(settings: Settings, specs: list[TopicSpec] | None = None, timeout_s: float = 30.0) -> list[str]:
    """Create the declared topics that do not exist yet; returns the names created."""
    admin = admin_client(settings)
    specs = specs if specs is not None else topic_specs(settings)
    existing = set(admin.list_topics(timeout=timeout_s).topics)
    missing = [s for s in specs if s.full_name not in existing]
    if not missing:
        return []
    futures = admin.create_topics(
        [NewTopic(s.full_name, s.partitions, s.replication_factor, config=s.config) for s in missing],
        operation_timeout=timeout_s,
    )
    created = []
    for name, future in futures.items():
        try:
            future.result(timeout=timeout_s)
            created.append(name)
        except KafkaException as exc:
            if exc.args[0].name() != "TOPIC_ALREADY_EXISTS":
                raise
    _wait_for_metadata(admin, [s.full_name for s in missing], timeout_s)
    return created


def _wait_for_metadata(admin: AdminClient, names: list[str], timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        known = admin.list_topics(timeout=timeout_s).topics
        if all(name in known and known[name].partitions for name in names):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"topics not visible in metadata after creation: {names}")
        time.sleep(0.2)


def list_topics(settings: Settings, timeout_s: float = 10.0) -> dict[str, int]:
    """Topic name -> partition count, as the broker reports it."""
    meta = admin_client(settings).list_topics(timeout=timeout_s)
    return {name: len(t.partitions) for name, t in meta.topics.items() if not name.startswith("__")}

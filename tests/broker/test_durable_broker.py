"""The embedded default (Apache Kafka, KRaft) keeps every acknowledged record: across `seamlessflow down`
and `up`, and across kill -9 of the broker. Records are written through the project's producer and read
back by a plain consumer that shares no code with the project's readers."""

import dataclasses
import json
import os
import signal

import pytest

from seamlessflow.config import Settings
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.ports import free_port_block
from seamlessflow.testing.cli import run_cli
from seamlessflow.testing.independent_reader import independent_read
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics

N = 500


def sf(data_dir, port, *args):
    """The CLI as a user runs it, which must succeed; its output."""
    done = run_cli(data_dir, port, *args, timeout=180)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


@pytest.mark.timeout(180)
@pytest.mark.slow
def test_acknowledged_records_survive_down_up_and_kill_9(tmp_path, codec):
    port = free_port_block(2)
    sf(tmp_path, port, "up", "--detach", "--only-broker")
    try:
        settings = Settings(bootstrap_servers=f"127.0.0.1:{port}")
        topic = Topics(settings).trajectories
        producer = MessageProducer(settings, codec)
        for i in range(N):  # acks=all, idempotent: each counts once it is acknowledged
            producer.send(topic, f"g{i}", dataclasses.replace(SAMPLES[2], event_id=f"s{i}/0", group_id=f"g{i}"))
        producer.flush()
        expected = sorted(f"g{i}".encode() for i in range(N))

        sf(tmp_path, port, "down")
        sf(tmp_path, port, "up", "--detach", "--only-broker")
        assert sorted(k for k, _ in independent_read(settings.kafka_bootstrap, topic)) == expected

        status = json.loads(sf(tmp_path, port, "status", "--json"))
        broker = next(s for s in status["services"] if s["name"] == "broker")
        os.kill(broker["pid"], signal.SIGKILL)  # a crash, not a clean shutdown; the supervisor restarts it
        assert sorted(k for k, _ in independent_read(settings.kafka_bootstrap, topic, timeout_s=120)) == expected
        status = json.loads(sf(tmp_path, port, "status", "--json"))
        assert next(s for s in status["services"] if s["name"] == "broker")["restarts"] == 1
        assert status["brokers"] == [{"id": 1, "address": f"127.0.0.1:{port}", "controller": True}]
    finally:
        sf(tmp_path, port, "down")


@pytest.mark.timeout(150)
@pytest.mark.slow
def test_assembled_trajectories_replay_bit_exact_after_down_and_up(tmp_path, codec):
    """The loop's records outlive the stack: sessions assembled by the real assembler before `down` are
    re-assembled from the session events after `up` and match the stored trajectories bit for bit."""
    import random

    from seamlessflow.testing.assembler_harness import AssemblerProcess, as_records, expected_trajectories, publish
    from seamlessflow.testing.sessions import forty_sessions

    port = free_port_block(2)
    sf(tmp_path, port, "up", "--detach", "--only-broker")
    try:
        settings = Settings(bootstrap_servers=f"127.0.0.1:{port}", data_dir=tmp_path / "assembler")
        sessions = {
            f"s{i}": list({c.call_id: c for c in sent}.values()) for i, sent in enumerate(forty_sessions()[:10])
        }
        proc = AssemblerProcess(settings, tmp_path).start()
        try:
            publish(settings, codec, as_records(sessions, random.Random(1)))
            expected = len(expected_trajectories(sessions))
            wait_until(
                lambda: len(independent_read(settings.kafka_bootstrap, Topics(settings).trajectories)) >= expected,
                120,
                lambda: f"{expected} trajectories; the assembler's log:\n{proc.log()}",
                every_s=0.5,
            )
        finally:
            proc.stop()
        sf(tmp_path, port, "down")
        sf(tmp_path, port, "up", "--detach", "--only-broker")
        checked = sf(tmp_path, port, "replay", "--check")  # exit 0: every trajectory re-assembles bit for bit
        assert f"{expected} trajectories" in checked or str(expected) in checked, checked
    finally:
        sf(tmp_path, port, "down")

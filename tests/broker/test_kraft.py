"""The embedded cluster's layout and configuration, and the jar lock, without starting Java."""

import hashlib

import pytest

from seamlessflow.broker import jars, kraft
from seamlessflow.config import Settings


def test_one_node_is_its_own_quorum_and_three_nodes_replicate_with_two_in_sync(tmp_path):
    one = kraft.nodes(Settings(data_dir=tmp_path, broker_port=30000))
    props = kraft.server_properties(one[0], one)
    assert props["controller.quorum.voters"] == "1@127.0.0.1:30001"
    assert (props["default.replication.factor"], props["min.insync.replicas"]) == ("1", "1")

    three = kraft.nodes(Settings(data_dir=tmp_path, brokers=3, broker_port=30000))
    assert [(n.port, n.controller_port) for n in three] == [(30000, 30003), (30001, 30004), (30002, 30005)]
    for node in three:
        props = kraft.server_properties(node, three)
        assert props["controller.quorum.voters"] == "1@127.0.0.1:30003,2@127.0.0.1:30004,3@127.0.0.1:30005"
        assert (props["default.replication.factor"], props["min.insync.replicas"]) == ("3", "2")
        assert props["offsets.topic.replication.factor"] == "3"
    assert Settings(brokers=3, broker_port=30000).kafka_bootstrap == "127.0.0.1:30000,127.0.0.1:30001,127.0.0.1:30002"


def test_a_broker_host_is_where_clients_reach_the_nodes_and_the_controllers_stay_on_loopback(tmp_path):
    one = kraft.nodes(Settings(data_dir=tmp_path, broker_port=30000))
    props = kraft.server_properties(one[0], one, "10.1.2.3")
    assert props["listeners"] == "PLAINTEXT://10.1.2.3:30000,CONTROLLER://127.0.0.1:30001"
    assert props["advertised.listeners"] == "PLAINTEXT://10.1.2.3:30000"
    assert Settings(broker_host="10.1.2.3", broker_port=30000).kafka_bootstrap == "10.1.2.3:30000"


def test_a_data_dir_laid_out_for_another_cluster_is_refused(tmp_path):
    kraft.kafka_dir(Settings(data_dir=tmp_path)).mkdir(parents=True)
    (tmp_path / "kafka" / "layout").write_text("1@19092/19093")
    with pytest.raises(RuntimeError, match="--brokers"):
        kraft.prepare(Settings(data_dir=tmp_path, brokers=3))


def test_the_lock_pins_kafka_and_a_tampered_jar_is_refused(tmp_path, monkeypatch):
    locked = jars.read_lock()
    assert jars.kafka_version(locked) == next(j.version for j in locked if j.artifact == "kafka_2.13")
    assert all(len(j.sha256) == 64 for j in locked)

    served = tmp_path / "repo"
    jar = jars.Jar("org.example", "thing", "1.0", hashlib.sha256(b"good").hexdigest())
    path = served / "org" / "example" / "thing" / "1.0" / "thing-1.0.jar"
    path.parent.mkdir(parents=True)
    path.write_bytes(b"tampered")
    monkeypatch.setattr(jars, "read_lock", lambda *_: [jar])
    with pytest.raises(RuntimeError, match="SHA-256"):
        jars.install(tmp_path / "libs", repo=served.as_uri(), log=lambda _: None)
    assert not (tmp_path / "libs" / "thing-1.0.jar").exists()
    path.write_bytes(b"good")
    jars.install(tmp_path / "libs", repo=served.as_uri(), log=lambda _: None)
    assert (tmp_path / "libs" / "thing-1.0.jar").read_bytes() == b"good"


def test_cluster_ids_never_look_like_an_option(monkeypatch):
    ids = iter([b"\xf8" + bytes(15), bytes(16)])  # base64url of the first starts with '-'
    monkeypatch.setattr(kraft.uuid, "uuid4", lambda: type("U", (), {"bytes": next(ids)})())
    assert not kraft.new_cluster_id().startswith("-")

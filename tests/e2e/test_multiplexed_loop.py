"""The issue-6 loop end to end, multiplexed, through every real component (slow: two vLLM-CPU engines).

Broker, scheduler + rollout manager (thread), two rollout worker processes with real vLLM engines
(`rollout-0` {rollout}, `rollout-1` {rollout, train}), the proxy (thread, engines discovered from the status
topic, obeying the control topic), the example single-turn agent (thread), the assembler (process), and
the DeepSpeed trainer (thread). Checks: trajectories trained, a weight version advanced, engines reloaded,
tokens labelled with the first and a later version, and no lost session (every published group came back whole).
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest

from seamlessflow.agents import AgentSettings, AgentWorker
from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import CommandAck, ResourceStatus, Task, TokenIO, Trajectory, WeightVersion
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.scheduler.timeline import intervals_from_records, kind_of
from seamlessflow.testing.assembler_harness import AssemblerProcess
from seamlessflow.testing.scheduler_fakes import RunningService
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics
from seamlessflow.trainer.config import TrainerConfig
from seamlessflow.trainer.loop import Trainer
from services.agents.examples import single_turn
from tests.agents.test_end_to_end import ProxyThread
from tests.agents.test_worker import Running
from tests.proxy.vllm_fixture import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]
GROUP_SIZE = 2


def rollout_process(config, resource_id, log_path):
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "services.rollout", "--config", str(config),
                                 "--resource-id", resource_id], stdout=log, stderr=log, start_new_session=True)


def test_multiplexed_loop_trains_updates_engines_and_loses_no_session(settings, codec, vllm_model_dir, tmp_path):
    settings = settings.with_overrides(rollout={
        "model": str(vllm_model_dir), "heartbeat_s": 0.5, "max_model_len": 256, "release_mode": "keep", "optimization_level": 0,
        "extra_args": LEAN_ENGINE_ARGS, "env": LEAN_ENGINE_ENV,
        "weight_load_methods": ["reload", "restart"],
        "workers": {"rollout-0": {"capability_tags": ["rollout"]},
                    "rollout-1": {"capability_tags": ["rollout", "train"]}}})
    config = settings.dump_yaml(tmp_path / "config.yaml")
    topics = Topics(settings)
    procs = [rollout_process(config, rid, tmp_path / f"{rid}.log") for rid in ("rollout-0", "rollout-1")]
    proxy = ProxyThread.__new__(ProxyThread)
    trainer = Trainer(settings, TrainerConfig(enabled=True, model_path=str(vllm_model_dir), group_size=GROUP_SIZE,
                                              batch_threshold=1, heartbeat_s=0.5))
    trainer_thread = threading.Thread(target=trainer.run, daemon=True)
    assembler = AssemblerProcess(settings, tmp_path)
    scheduler = agents = None
    try:
        _start_proxy(proxy, settings, tmp_path)
        trainer_thread.start()
        assembler.start()
        wait_until(lambda: proxy.service.server.engines.routable_count == 2, 600, "two engines routable", every_s=0.5,
                   alive=procs)
        agents = Running(AgentWorker(settings, codec, single_turn.agent, settings.team, "key-default",
                                     AgentSettings(proxy_url=proxy.service.base_url.removesuffix("/v1"), pool="p",
                                                   concurrency=4, request_timeout_s=300)))
        options = SchedulerOptions(policy="multiplexed", tick_s=0.5, min_dwell_s=2, switch_cost_s=1,
                                   batch_threshold=GROUP_SIZE, heartbeat_timeout_s=120)
        manager = ManagerOptions(group_size=GROUP_SIZE, max_in_flight=2)
        scheduler = RunningService(SchedulerService(settings, options, manager, codec))
        m = scheduler.service.manager
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
    finally:
        if scheduler is not None:
            scheduler.close()
        if agents is not None:
            agents.stop()
        trainer.stopping = True
        trainer_thread.join(120)
        assembler.stop()
        if getattr(proxy, "service", None):
            proxy.stop()
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(60)

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
    assert scheduler.service.manager.lost == 0
    kinds = {(i.resource_id, i.kind) for i in intervals_from_records(read_messages(settings, topics.status, codec))}
    assert ("rollout-1", "train") in kinds and ("rollout-0", "rollout") in kinds


def _start_proxy(proxy, settings, tmp_path):
    """ProxyThread from the agents' end-to-end test, but discovering engines and obeying the control topic."""
    import asyncio

    from seamlessflow.proxy import ProxyConfig, ProxyService
    from seamlessflow.teams import TeamKeys

    proxy.loop = asyncio.new_event_loop()
    threading.Thread(target=proxy.loop.run_forever, daemon=True).start()
    config = ProxyConfig(port=0, engines=[], served_model="tiny", heartbeat_s=0.5)
    keys = TeamKeys(tmp_path / "teams.json", {settings.team: "key-default"})
    proxy.service = proxy._run(ProxyService(settings, config=config, team_keys=keys).start())
    proxy._run(proxy.service.wait_listening())


def _lent_to_training(settings, codec) -> bool:
    return any(s.resource_id == "rollout-1" and kind_of(s) == "train"
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

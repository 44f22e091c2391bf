"""The scheduler service through the real broker, with fake resources that are real Kafka clients."""

from __future__ import annotations

import dataclasses

import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import ControlCommand, ResourceStatus, WeightVersion
from seamlessflow.scheduler.manager import BASE
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.role_intervals import intervals_from_records
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.testing.in_process import ServiceThread
from seamlessflow.testing.poison import assert_dead_lettered, letters, produce_poison, produce_raw
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.testing.scheduler_fakes import (
    FakeResource,
    publish_trajectories,
    publish_weights,
    trajectory,
    wait_until,
)
from seamlessflow.topics import Topics

pytestmark = pytest.mark.timeout(180)


def options(policy: str, **extra) -> SchedulerOptions:
    fields = {"tick_s": 0.2, "min_dwell_s": 0, "switch_cost_s": 0.1, "batch_threshold": 2, **extra}
    return SchedulerOptions(policy=policy, **fields)


def commands(settings, codec, resource_id: str) -> list[tuple[int, str, str | int | None]]:
    out = []
    for c in read_messages(settings, Topics(settings).control, codec):
        if isinstance(c, ControlCommand) and c.resource_id == resource_id:
            out.append((c.epoch, c.command, c.role or c.mode or c.weight_version))
    return out


@pytest.fixture
def fakes(settings, codec):
    made: list[FakeResource] = []

    def make(*args, **kwargs) -> FakeResource:
        made.append(FakeResource(settings, codec, *args, **kwargs))
        made[-1].heartbeat()
        return made[-1]

    yield make
    for fake in made:
        fake.close()


def test_batch_ready_preempts_flexible_resource_then_weight_update_returns_it(settings, codec, fakes):
    steady = fakes("r0", ["rollout"])
    flexible = fakes("r1", ["rollout", "train"])
    manager = ManagerOptions(group_size=2, max_in_flight=2)
    running = ServiceThread(SchedulerService(settings, options("multiplexed"), manager, codec))
    try:
        wait_until(lambda: running.service.manager.published == 2, [steady, flexible])
        publish_trajectories(settings, codec, f"{settings.run}.arith-0-0.r0", ["s1", "s2"])
        wait_until(lambda: flexible.active == "train", [steady, flexible])
        assert steady.applied == []  # {rollout}-only never stops
        publish_weights(settings, codec, 1)
        wait_until(lambda: flexible.active == "rollout" and flexible.weight_version == 1
                   and steady.weight_version == 1 and steady.state == "active", [steady, flexible])
    finally:
        running.close()
    assert commands(settings, codec, "r1") == [(1, "set_active", "train"), (2, "set_active", "rollout"),
                                               (3, "load_weights", 1)]
    assert commands(settings, codec, "r0") == [(1, "pause", "keep"), (2, "load_weights", 1), (3, "resume", None)]
    uris = {
        c.weight_uri for c in read_messages(settings, Topics(settings).control, codec) if c.command == "load_weights"
    }
    assert uris == {"file:///weights/v1"}
    kinds = {
        (i.resource_id, i.kind) for i in intervals_from_records(read_messages(settings, Topics(settings).status, codec))
    }
    assert {("r1", "rollout"), ("r1", "lent"), ("r0", "rollout"), ("r0", "sync")} <= kinds  # r1 lent to train


def test_silent_resource_is_marked_failed_and_its_role_reassigned(settings, codec, fakes):
    trainer = fakes("r0", ["rollout", "train"], active="train")
    spare = fakes("r1", ["rollout", "train"], active="rollout")
    opts = options("disaggregated", train_pool_size=1, heartbeat_timeout_s=2.0)
    running = ServiceThread(SchedulerService(settings, opts, ManagerOptions(enabled=False), codec))
    try:
        wait_until(lambda: len(running.service.published) == 0 and running.service.view.tracked.keys() == {"r0", "r1"},
                   [trainer, spare])
        trainer.alive = False  # stops heartbeating and obeying
        wait_until(lambda: spare.active == "train", [trainer, spare])
    finally:
        running.close()
    latest = {}
    for status in read_messages(settings, Topics(settings).status, codec):
        if isinstance(status, ResourceStatus):
            latest[status.resource_id] = status
    assert latest["r0"].state == "failed" and latest["r0"].figures["marked_by_scheduler"] == 1.0
    assert commands(settings, codec, "r0") == []
    assert commands(settings, codec, "r1") == [(1, "set_active", "train")]
    timeline = intervals_from_records(read_messages(settings, Topics(settings).status, codec))
    assert max((i for i in timeline if i.resource_id == "r0"), key=lambda i: i.start).kind == "failed"


def test_restarted_scheduler_continues_epochs_and_task_count(settings, codec, fakes):
    engine = fakes("r0", ["rollout"])
    manager = ManagerOptions(group_size=1, max_in_flight=3)
    first = ServiceThread(SchedulerService(settings, options("disaggregated"), manager, codec))
    try:
        publish_weights(settings, codec, 1)
        wait_until(lambda: engine.weight_version == 1 and engine.state == "active", [engine])
        wait_until(lambda: first.service.manager.published == 3, [engine])
    finally:
        first.close()
    publish_weights(settings, codec, 2)
    second = ServiceThread(SchedulerService(settings, options("disaggregated"), manager, codec))
    try:
        wait_until(lambda: engine.weight_version == 2 and engine.state == "active", [engine])
        assert second.service.manager.published == 3  # rebuilt from the tasks topic, nothing re-published
    finally:
        second.close()
    assert [epoch for epoch, *_ in commands(settings, codec, "r0")] == [1, 2, 3, 4, 5, 6]
    assert len(read_messages(settings, Topics(settings).tasks, codec)) == 3


def test_manager_keeps_in_flight_groups_within_bound(settings, codec):
    manager = ManagerOptions(group_size=2, max_in_flight=3)
    running = ServiceThread(SchedulerService(settings, options("disaggregated", batch_threshold=100), manager, codec))
    try:
        wait_until(lambda: running.service.manager.published == 3, [])
        committed = lambda: read_messages(settings, Topics(settings).tasks, codec)  # noqa: E731
        wait_until(lambda: len(committed()) == 3, [])  # counted when produced, readable once the tick commits
        tasks = committed()
        assert all(t.group_size == 2 for t in tasks)
        publish_trajectories(settings, codec, tasks[0].group_id, ["s1"])  # half a group: no new work
        wait_until(lambda: running.service.manager.trajectories == 1, [])
        assert running.service.manager.published == 3
        publish_trajectories(settings, codec, tasks[0].group_id, ["s2"])
        wait_until(lambda: running.service.manager.published == 4, [])
    finally:
        running.close()
    tasks = read_messages(settings, Topics(settings).tasks, codec)
    assert sorted(t.task_id for t in tasks) == ["arith-0-0.r0", "arith-0-1.r0", "arith-0-2.r0", "arith-0-3.r0"]
    assert running.service.manager.outstanding == 3


def test_weight_update_is_wrapped_in_proxy_pause_and_resume(settings, codec, fakes):
    proxy = fakes("proxy", ["proxy"], active="proxy", kind="proxy")
    engine = fakes("r0", ["rollout"])
    running = ServiceThread(SchedulerService(settings, options("disaggregated"), ManagerOptions(enabled=False), codec))
    try:
        wait_until(lambda: running.service.view.proxies.keys() == {"proxy"}, [proxy, engine])
        publish_weights(settings, codec, 1)
        wait_until(lambda: engine.weight_version == 1 and proxy.weight_version == 1 and proxy.state == "active",
                   [proxy, engine])
    finally:
        running.close()
    order = [(c.resource_id, c.epoch, c.command, c.weight_version)
             for c in read_messages(settings, Topics(settings).control, codec)]
    assert order == [("proxy", 1, "pause", None), ("r0", 1, "pause", None), ("r0", 2, "load_weights", 1),
                     ("r0", 3, "resume", None), ("proxy", 2, "resume", 1)]


def test_poison_on_every_input_is_dead_lettered_at_rebuild_and_live_and_folding_goes_on(settings, codec):
    topics = Topics(settings)
    version = WeightVersion("w-1", 1, "file:///w/1", 1, "hf-safetensors", "trainer-0", settings.team, settings.run, 0)
    samples = {
        topics.status: SAMPLES[5],
        topics.weights: version,
        topics.tasks: SAMPLES[3],
        topics.trajectories: SAMPLES[2],
    }
    rebuilt = {topic: produce_poison(settings, codec, topic, sample) for topic, sample in samples.items()}
    misplaced = codec.encode(SAMPLES[3], topics.weights)  # a Task where only WeightVersions belong
    produce_raw(settings, topics.weights, misplaced)
    running = ServiceThread(SchedulerService(settings, options("disaggregated"), ManagerOptions(enabled=False), codec))
    try:
        wait_until(lambda: running.service._offsets, [])  # rebuilt: the live consumer starts after this
        live = {topic: produce_poison(settings, codec, topic, dataclasses.replace(samples[topic], event_id="live"))
                for topic in (topics.status, topics.weights)}
        publish_weights(settings, codec, 3)
        wait_until(lambda: running.service.view.current_version == 3, [])
    finally:
        running.close()
    found = letters(settings, codec, "scheduler")
    for topic, values in [*rebuilt.items(), *live.items()]:
        assert_dead_lettered(found, values, topic)
    assert "unexpected Task" in next(d.reason for d in found if d.value == misplaced)


def test_a_source_of_another_team_has_its_trajectories_counted(settings, codec):
    """A task source may publish for another team (`manager.sources[].team`, and each adapter team's in a stack
    that trains the teams' adapters): the scheduler's fold must count that team's trajectories, or its groups
    never finish and the manager stops publishing once `max_in_flight` groups are out."""
    sources = [{"name": "red", "team": "red", "demo_count": 2}]
    service = SchedulerService(settings, options("multiplexed"), ManagerOptions(group_size=2, sources=sources), codec)
    try:
        assert service.manager is not None
        (task, *_) = service.manager.next_tasks(0)
        service.manager.on_task(task)  # as publishing it does
        assert task.team == "red"
        for reward, session in enumerate(("s1", "s2")):
            service.fold(dataclasses.replace(trajectory(task.group_id, session, reward=float(reward)), team="red"))
        assert service.manager.finished == 1
        service.fold(dataclasses.replace(trajectory(task.group_id, "s3"), team="blue", group_id="blue.g"))
        assert service.view.trajectories_since_version == 2  # a team none of its sources publishes for: not ours
    finally:
        service.producer.close()


def test_in_a_stack_that_trains_adapters_each_team_has_a_ledger_and_a_backlog_of_its_own(settings, codec):
    """Found on `make up-teams`: one batch per version for two teams' rollouts let 6 groups out in all; each team's
    trainer waited for its next batch and no task came. Each team's rollouts now count against its own adapter."""
    teams = {team: {"lora": {"name": f"{team}-lora", "path": f"/adapters/{team}", "rank": 4}} for team in ("r", "b")}
    adapters = settings.with_overrides(proxy={"teams": teams}, trainer={"target": "adapters"})
    manager = ManagerOptions(group_size=2, sources=[{"name": t, "team": t} for t in teams])
    base = SchedulerService(settings, options("multiplexed"), manager, codec)
    service = SchedulerService(adapters, options("multiplexed"), manager, codec)
    try:
        assert service.manager is not None and base.manager is not None
        assert set(base.manager.ledgers) == {BASE} and set(service.manager.ledgers) == {"r-lora", "b-lora"}
        batches = {ledger.batch_size for ledger in service.manager.ledgers.values()}
        assert batches == {base.manager.ledgers[BASE].batch_size}  # one batch per version of each adapter
        task = next(t for t in service.manager.next_tasks() if t.team == "r")
        service.manager.on_task(task)
        service.fold(dataclasses.replace(trajectory(task.group_id, "s1"), team="r"))
        assert service.view.backlog == {"r-lora": 1}
    finally:
        base.producer.close()
        service.producer.close()

"""The training time share in the scheduler, through the real broker: the teams' adapter trainers (fake resources,
real Kafka clients and the real control protocol) are given turns by their teams' weights."""

from __future__ import annotations

import dataclasses

import pytest

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import ResourceStatus
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions, TrainShareOptions
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.scheduler.train_turns import TrainTurns
from seamlessflow.scheduler.view import ClusterView
from seamlessflow.testing.in_process import ServiceThread
from seamlessflow.testing.scheduler_fakes import FakeResource, trajectory, wait_until
from seamlessflow.topics import Topics
from seamlessflow.trainer.adapter_trainers import AdapterTrainer, adapter_trainers

pytestmark = pytest.mark.timeout(180)
TEAMS = {team: {"lora": {"name": f"{team}-lora", "path": f"/adapters/{team}", "rank": 4}} for team in ("r", "b")}


def test_a_trainer_with_a_whole_batch_formed_is_ready_without_a_backlog():
    view = ClusterView(frozenset({"trainer"}), batch_trajectories=4)
    status = ResourceStatus("e", "trainer-0-r", "trainer", ["train"], "idle", "active", 0, {"steps_ready": 1.0},
                            "default", "default", 0)
    view.on_status(status, 0.0)
    turns = TrainTurns(TrainShareOptions(enabled=True), (AdapterTrainer("r", "r-lora", "trainer-0-r"),), 10.0)
    assert turns.step(view, 1.0) == {"trainer-0-r": "train"}
    view.on_status(dataclasses.replace(status, figures={"steps_ready": 0.5}), 2.0)
    view.backlog["r-lora"] = 3  # under a batch: nothing to train yet
    assert turns.step(view, 3.0) == {"trainer-0-r": "idle"}
    assert turns.figures() == {"train_turn:r": 0.0, "train_turn_s:r": 2.0}


def test_the_scheduler_gives_adapter_trainers_turns_by_their_teams_weights(settings, codec):
    settings = settings.with_overrides(
        proxy={"teams": TEAMS}, trainer={"target": "adapters", "teams": {"r": {"share_weight": 3.0}}})
    assert [(t.team, t.share_weight) for t in adapter_trainers(settings)] == [("r", 3.0), ("b", 1.0)]
    trainers = [FakeResource(settings, codec, t.resource_id, ["train"], active="idle", kind="trainer")
                for t in adapter_trainers(settings)]
    producer = MessageProducer(settings, codec)
    for team in TEAMS:  # a batch (2) and more of each team's rollouts: both trainers have work throughout
        for session in ("s1", "s2", "s3"):
            record = dataclasses.replace(trajectory(f"{team}.g", f"{team}-{session}"), team=team, run=settings.run)
            producer.send(Topics(settings).trajectories, record.group_id, record)
    producer.flush()
    options = SchedulerOptions(policy="disaggregated", tick_s=0.1, min_dwell_s=0, batch_threshold=2,
                               train_share=TrainShareOptions(enabled=True, slice_s=0.5))
    manager = ManagerOptions(group_size=2, max_in_flight=1, sources=[{"name": t, "team": t} for t in TEAMS])
    service = SchedulerService(settings, options, manager, codec)
    running = ServiceThread(service)
    try:
        def turns_of(fake: FakeResource) -> int:
            return sum(1 for c in fake.applied if c.command == "set_active" and c.role == "train")

        wait_until(lambda: min(turns_of(t) for t in trainers) >= 3, trainers, timeout_s=120)
        assert service.train_turns is not None
        held = {rid.removeprefix("trainer-0-"): s for rid, s in service.train_turns.share.held_s.items()}
        assert held["r"] > 2 * held["b"]  # weights 3:1, in slices of 0.5 s
        assert all(c.role in ("train", "idle") for t in trainers for c in t.applied)
    finally:
        running.close()
        for fake in trainers:
            fake.close()

"""Sessions in flight read from the real status topic: the run's serving engines and trainers, fresh heartbeats
only; a worker with `max_concurrency` runs at the adapted limit and says why in its heartbeat."""

from __future__ import annotations

import dataclasses

from seamlessflow.agents import AgentOptions, AgentWorker
from seamlessflow.agents.flight import FlightControl
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.core.sessions_in_flight import EngineLoad, FlightBounds
from seamlessflow.kafka.io import MessageProducer, read_topic
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import ResourceStatus
from seamlessflow.testing import agent_fns
from seamlessflow.testing.agent_worker_harness import KEY
from seamlessflow.testing.end_proxy_stand_in import EndProxyStandIn
from seamlessflow.testing.in_process import AgentsThread
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics


def engine(settings, rid, running, waiting, role="rollout", run=None, age_s=0.0) -> ResourceStatus:
    status = resource_status(rid, ResourceKind.ROLLOUT, ResourceState.ACTIVE, role, settings.team, run or settings.run,
                             figures={"requests_running": running, "requests_waiting": waiting, "kv_cache_usage": 0.2})
    return dataclasses.replace(status, created_at_ms=status.created_at_ms - int(age_s * 1000))


def trainer(settings, steps_ready) -> ResourceStatus:
    return resource_status("trainer-0", ResourceKind.TRAINER, ResourceState.ACTIVE, "train", settings.team,
                           settings.run, figures={"steps_ready": steps_ready})


def publish(settings, codec, *statuses):
    producer = MessageProducer(settings, codec)
    for status in statuses:
        producer.send(Topics(settings).status, status.resource_id, status)
    producer.flush()


class Ticks:
    """A clock that moves `every_s` at each reading: every `update` decides."""

    def __init__(self):
        self.t = 0.0

    def __call__(self):
        self.t += 10.0
        return self.t


def test_the_limit_follows_the_runs_fresh_serving_engines_and_its_trainer(settings, codec):
    publish(settings, codec, engine(settings, "rollout-0", 0, 0), engine(settings, "rollout-1", 4, 0),
            engine(settings, "rollout-2", 9, 9, role="train"),  # lent to the trainer: not serving
            engine(settings, "rollout-3", 9, 9, age_s=120),  # silent for two minutes
            engine(settings, "other-run", 9, 9, run="other"), trainer(settings, 0.0))
    flight = FlightControl(settings, codec, FlightBounds(2, 16, step=2), start=8, name="t", clock=Ticks())
    try:
        wait_until(lambda: flight.update() >= 12)  # up 2 a decision while rollout-0 has room
        assert sorted(flight.engines(), key=lambda e: e.running) == [EngineLoad(0, 0, 0.2), EngineLoad(4, 0, 0.2)]
        assert flight.decision.reason == "an engine has room"
        publish(settings, codec, trainer(settings, 3.0))
        before = flight.limit
        wait_until(lambda: flight.update() < before)
        assert flight.decision.reason == "the trainer is behind (3 batches ready)"
        publish(settings, codec, trainer(settings, 0.0), engine(settings, "rollout-0", 8, 4),
                engine(settings, "rollout-1", 8, 5))
        wait_until(lambda: flight.update() == 2 and "every engine queues" in flight.decision.reason)
    finally:
        flight.close()


def test_a_worker_with_a_maximum_runs_at_the_adapted_limit_and_says_why(settings, codec):
    publish(settings, codec, engine(settings, "rollout-0", 0, 0))
    with EndProxyStandIn() as proxy:
        options = AgentOptions(proxy_url=proxy.url, concurrency=2, max_concurrency=5, heartbeat_s=0.5,
                               end_timeout_s=1.0, revoke_grace_s=2.0)
        running = AgentsThread(AgentWorker(settings, codec, agent_fns.reward_from_payload, "red", KEY, options))
        try:
            # read, not decided here: the worker's own loop decides (its status feed is one thread's)
            wait_until(lambda: running.worker._flight is not None and running.worker._flight.limit == 5,
                       timeout_s=60)  # up one a decision, every 2 s: ~6 s
        finally:
            running.stop()
    beats = [r.message for r in read_topic(settings, Topics(settings).status, codec)
             if getattr(r.message, "resource_id", None) == running.worker.resource_id]
    assert beats[-1].figures["concurrency"] == 5.0
    assert beats[-1].note == "sessions in flight 5: an engine has room"

"""The one heartbeat: throttled to its period unless forced or told news is due, keyed by the resource id,
never fatal when the record cannot be queued, and a thread body that beats once per period until stopped."""

from __future__ import annotations

import os
import threading
import time

from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.heartbeat import Heartbeat, worker_resource_id
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import ResourceStatus


def status() -> ResourceStatus:
    return resource_status("r1", ResourceKind.AGENT, ResourceState.ACTIVE, "agent", "team", "run")


class Sent(list):
    def __call__(self, topic: str, key: str, message: ResourceStatus) -> bool:
        self.append((topic, key, message.resource_id))
        return True


def test_beats_once_per_period_unless_forced_or_news_is_due():
    sent = Sent()
    heartbeat = Heartbeat(sent, "status", 60.0, status)
    assert heartbeat.beat() and not heartbeat.beat()  # the second is within the period
    assert heartbeat.beat(force=True)
    heartbeat.soon()
    assert heartbeat.beat() and not heartbeat.beat()
    assert sent == [("status", "r1", "r1")] * 3


def test_a_record_that_cannot_be_queued_is_logged_not_raised(caplog):
    def broken(topic, key, message):
        raise RuntimeError("queue full")

    heartbeat = Heartbeat(broken, "status", 1.0, status)
    assert heartbeat.beat() is False
    assert heartbeat.publish(status()) is False
    assert "heartbeat not queued: queue full" in caplog.text


def test_the_thread_body_beats_every_period_until_stopped():
    sent, stop = Sent(), threading.Event()
    thread = threading.Thread(target=Heartbeat(sent, "status", 0.05, status).run, args=(stop,))
    thread.start()
    time.sleep(0.3)
    stop.set()
    thread.join(2)
    assert not thread.is_alive() and 2 <= len(sent) <= 7


def test_each_worker_process_of_a_pool_has_its_own_id():
    assert worker_resource_id("reward", "team.reward.pool").startswith("reward.team.reward.pool.")
    assert worker_resource_id("agent", "g").endswith(f"-{os.getpid()}")

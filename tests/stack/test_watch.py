"""The live table's watcher follows the status topic: the newest heartbeat per resource of this team and
run, poison skipped without a letter (a viewer files none)."""

import dataclasses
import time

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.stack.watch import ResourceWatcher
from seamlessflow.testing.poison import letters, produce_raw
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics

STATUS = SAMPLES[5]


def test_newest_heartbeat_per_resource_of_this_run_and_poison_skipped(settings, codec):
    topic = Topics(settings).status
    mine = dataclasses.replace(STATUS, team=settings.team, run=settings.run)
    producer = MessageProducer(settings, codec)
    producer.send(topic, "gpu-0", dataclasses.replace(mine, state="starting"))
    producer.flush()
    produce_raw(settings, topic, b"\x07junk", key="gpu-0")
    producer.send(topic, "gpu-0", mine)
    producer.send(topic, "gpu-9", dataclasses.replace(mine, resource_id="gpu-9", run="another-run"))
    producer.flush()
    watcher = ResourceWatcher(settings)
    rows, deadline = [], time.monotonic() + 20
    while time.monotonic() < deadline and not (rows and rows[0]["state"] == "active"):
        rows = watcher.rows()
        time.sleep(0.1)
    assert [(row["id"], row["state"]) for row in rows] == [("gpu-0", "active")]
    assert letters(settings, codec, "reader") == []


def test_engine_readiness_takes_any_role_but_only_this_starts_heartbeats():
    """`up` waits for engines, never for a role: the scheduler that sets roles starts after them. A
    heartbeat older than the wait is a previous run's (the topic keeps it across `down`/`up`)."""
    from seamlessflow.stack.watch import _engine_awaited

    since = 1_000
    in_train = dataclasses.replace(STATUS, resource_id="rollout-1", active_tag="train", state="paused",
                                   created_at_ms=since + 5, figures={"engine_up": 1.0})
    assert _engine_awaited("rollout-1", in_train, since) == ""
    assert "heartbeat" in _engine_awaited("rollout-1", dataclasses.replace(in_train, created_at_ms=since - 1), since)
    assert "heartbeat" in _engine_awaited("rollout-1", None, since)
    assert "to start" in _engine_awaited("rollout-1", dataclasses.replace(in_train, state="starting"), since)
    down = dataclasses.replace(in_train, state="active", figures={"engine_up": 0.0})
    assert "to answer" in _engine_awaited("rollout-1", down, since)

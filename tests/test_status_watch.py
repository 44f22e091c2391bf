"""The live table's watcher follows the status topic: the newest heartbeat per resource of this team and
run, poison skipped without a letter (a viewer files none)."""

import dataclasses

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.status_watch import ResourceWatcher
from seamlessflow.testing.poison import letters, produce_raw
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.testing.waiting import wait_until
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
    def once_active() -> list[dict] | None:
        rows = watcher.rows()
        return rows if rows and rows[0]["state"] == "active" else None

    rows = wait_until(once_active, 20, "an active row")
    assert [(row["id"], row["state"]) for row in rows] == [("gpu-0", "active")]
    assert letters(settings, codec, "reader") == []

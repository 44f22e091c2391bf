"""`resource_rows` (for `seamlessflow status --json`) through the real broker."""

from seamlessflow.kafka.io import MessageProducer
from seamlessflow.stack.rows import resource_rows, trainer_version
from seamlessflow.testing.status_records import status
from seamlessflow.topics import Topics


def test_latest_status_per_resource(settings, codec):
    producer = MessageProducer(settings, codec)
    for message in (
        status("r1", 0, "rollout", version=1, tokens_per_s=5.0),
        status("r0", 1, "rollout"),
        status("r1", 2, "train", "switching", version=2, tags=("rollout", "train"), hardware=("compute", "h100")),
        status("trainer-0", 2, "train", kind="trainer", version=3, tags=("train",)),
    ):
        producer.send(Topics(settings).status, message.resource_id, message)
    producer.flush()
    rows = resource_rows(settings)
    assert [row["id"] for row in rows] == ["r0", "r1", "trainer-0"]
    r1 = rows[1]
    assert (r1["active_tag"], r1["state"], r1["weight_version"], r1["capability_tags"]) == (
        "train",
        "switching",
        2,
        ["rollout", "train"],
    )
    assert r1["figures"] == {} and r1["heartbeat_age_s"] > 0
    assert r1["hardware_tags"] == ["compute", "h100"] and rows[0]["hardware_tags"] == []
    assert trainer_version(rows) == 3


def test_a_trainer_row_that_names_no_version_yet_is_no_version():
    rows = [{"kind": "trainer", "weight_version": None}, {"kind": "trainer", "weight_version": 4},
            {"kind": "rollout", "weight_version": 9}]
    assert trainer_version(rows) == 4
    assert trainer_version(rows[:1]) is None

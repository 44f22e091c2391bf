"""The record builders fill ids, clocks and defaults the same way for every service."""

from seamlessflow.kafka.records import letter_for, resource_status


def test_resource_status_fills_what_a_service_does_not_decide():
    a = resource_status("gpu-0", "rollout", "active", "rollout", "teamA", "run1", figures={"n": 3})
    b = resource_status("gpu-0", "rollout", "active", "rollout", "teamA", "run1")
    assert a.event_id != b.event_id and a.created_at_ms > 0
    assert a.figures == {"n": 3.0} and isinstance(a.figures["n"], float)
    assert (a.weight_version, a.epoch, a.engine_url, a.capability_tags, a.hardware_tags) == (-1, 0, None, [], [])


def test_a_letter_read_again_gets_the_same_id():
    one = letter_for("svc", "x.tasks", 2, 41, b"k", None, "bad", "teamA", "run1")
    two = letter_for("svc", "x.tasks", 2, 41, b"k", None, "bad", "teamA", "run1")
    assert one.event_id == two.event_id == "svc:x.tasks/2/41" and one.value == b""
    assert letter_for("svc", "x.tasks", 2, 41, None, b"v", "r", "t", "r", detail="s9").event_id.endswith("/s9")

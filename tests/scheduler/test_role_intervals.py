import tracemalloc

from seamlessflow.avro import Codec
from seamlessflow.core.accounting import account
from seamlessflow.core.timeline import Interval, bubble_ratio
from seamlessflow.messages import ResourceStatus
from seamlessflow.scheduler.role_intervals import (
    clip,
    device_timeline,
    intervals_from_records,
    kind_of,
    role_switches,
    timeline_sample,
)
from seamlessflow.testing.status_records import status, two_resource_run

CODEC = Codec()


def test_intervals_follow_heartbeats_and_carve_weight_loads():
    got = sorted(intervals_from_records(two_resource_run()), key=lambda i: (i.resource_id, i.start))
    assert got == [
        Interval("r0", 0, 5, "rollout"), Interval("r0", 5, 6, "sync"), Interval("r0", 6, 10, "rollout"),
        Interval("r1", 0, 4, "rollout"), Interval("r1", 4, 5, "switch"), Interval("r1", 5, 9, "lent"),
        Interval("r1", 9, 10, "held"),
        Interval("trainer-0", 0, 5, "wait-data"), Interval("trainer-0", 5, 9, "train"),
        Interval("trainer-0", 9, 10, "wait-data"),
    ]


def test_per_device_the_lent_engine_trains_and_the_trainer_is_no_third_resource():
    got = sorted(device_timeline(two_resource_run()), key=lambda i: (i.resource_id, i.start))
    assert got[3:] == [Interval("r1", 0, 4, "rollout"), Interval("r1", 4, 5, "switch"),
                       Interval("r1", 5, 9, "train"), Interval("r1", 9, 10, "held")]
    assert {i.resource_id for i in got} == {"r0", "r1"}
    assert abs(bubble_ratio(got) - 0.15) < 1e-9 and abs(account(got).bubble - 0.15) < 1e-9
    assert abs(bubble_ratio(intervals_from_records(two_resource_run())) - 13 / 30) < 1e-9  # per lane: 3 lanes


def test_kinds_of_states():
    assert kind_of(status("r", 0, "rollout", "paused")) == "sync"
    assert kind_of(status("r", 0, "train", "stopped")) == "failed"
    assert kind_of(status("r", 0, "rollout", "starting")) == "sync"  # loading its model
    assert kind_of(status("r", 0, "rollout", running=0.0)) == "wait-load"
    assert kind_of(status("r", 0, "rollout", running=3.0)) == "rollout"
    assert kind_of(status("r", 0, "rollout", requests_running=0.0)) == "wait-load"
    assert kind_of(status("r", 0, "idle")) == "held"
    assert kind_of(status("r", 0, "train", tags=("rollout", "train"))) == "lent"
    assert kind_of(status("t", 0, "train", kind="trainer", tags=("train",))) == "train"


def test_role_switches_are_listed_in_time_order():
    assert role_switches(two_resource_run()) == [(4.0, "r1", "rollout", "train"), (9.0, "r1", "train", "idle")]
    origin = min(r.created_at_ms for r in two_resource_run())
    assert role_switches(two_resource_run(), origin_ms=origin + 4000)[0][0] == 0.0


def test_a_trainer_is_training_only_as_long_as_its_busy_seconds_grew():
    records = [status("trainer-0", t, "train", kind="trainer", tags=("train",), busy_s=busy)
               for t, busy in ((0, 0.0), (2, 0.5), (4, 2.5), (6, 2.5))]
    got = sorted(intervals_from_records(records), key=lambda i: i.start)
    assert got == [Interval("trainer-0", 0, 0.5, "train"), Interval("trainer-0", 0.5, 2, "wait-data"),
                   Interval("trainer-0", 2, 4, "train"), Interval("trainer-0", 4, 6, "wait-data")]


def test_clip_keeps_a_window_and_origin_moves_the_zero():
    records = two_resource_run()
    origin = min(r.created_at_ms for r in records)
    shifted = device_timeline(records, origin_ms=origin + 4000)
    assert min(i.start for i in shifted) == -4
    window = sorted(clip(shifted, 0, 2), key=lambda i: (i.resource_id, i.start))
    assert window == [Interval("r0", 0, 1, "rollout"), Interval("r0", 1, 2, "sync"),
                      Interval("r1", 0, 1, "switch"), Interval("r1", 1, 2, "train")]


def test_a_slimmed_history_draws_the_same_timeline_in_under_half_the_memory():
    loads = {"requests_waiting": 2.0, "kv_cache_usage": 0.3, "generation_tokens_total": 1e6, "tokens_per_s": 90.0,
             "prompt_tokens_total": 2e6, "last_swap_ms": 12.0}
    records = two_resource_run() + [
        status("r2", t, "rollout", hardware=("compute",), requests_running=running, **loads)
        for t, running in ((0, 2.0), (3, 0.0), (6, 1.0), (10, 1.0))
    ] + [status("trainer-0", t, "train", kind="trainer", tags=("train",), busy_s=busy, **loads)
         for t, busy in ((0, 0.0), (2, 0.5), (4, 2.5))]
    slim = [timeline_sample(r) if isinstance(r, ResourceStatus) else r for r in records]
    assert intervals_from_records(slim) == intervals_from_records(records)
    assert role_switches(slim) == role_switches(records)
    assert [kind_of(s) for s in slim if isinstance(s, ResourceStatus)] == [
        kind_of(r) for r in records if isinstance(r, ResourceStatus)]
    assert held_bytes(lambda: [timeline_sample(fresh_copy(records[-1])) for _ in range(2000)]) < \
        held_bytes(lambda: [fresh_copy(records[-1]) for _ in range(2000)]) / 2


def fresh_copy(record: ResourceStatus) -> ResourceStatus:
    """A heartbeat as decoded from the topic: its own strings, not the test's."""
    return CODEC.decode(CODEC.encode(record, "status"))


def held_bytes(make) -> int:
    tracemalloc.start()
    try:
        kept = make()
        held = tracemalloc.get_traced_memory()[0]
        del kept
        return held
    finally:
        tracemalloc.stop()

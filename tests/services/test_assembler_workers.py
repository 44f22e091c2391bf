"""Two assembler workers in one consumer group share the session-events partitions through the real broker."""

import random
import time

import pytest

from seamlessflow.testing.assembler_harness import (
    AssemblerProcess,
    as_records,
    expected_trajectories,
    publish,
    wait_for,
)
from seamlessflow.testing.sessions import multi_turn_sessions
from seamlessflow.testing.waiting import wait_until

pytestmark = pytest.mark.slow


def wait_until_shared(workers, timeout_s: float) -> list[set[int] | None]:
    def shared() -> list[set[int] | None] | None:
        owned = [w.assigned() for w in workers]
        return owned if all(owned) and set.union(*owned) == {0, 1, 2, 3} else None  # type: ignore[misc]

    return wait_until(shared, timeout_s, lambda: "the four partitions shared:\n" + "\n".join(w.log() for w in workers),
                      every_s=0.5, alive=[w.running for w in workers])


def test_two_workers_share_the_partitions_and_survive_one_being_killed(settings, codec, tmp_path):
    rng = random.Random(11)
    first, second = multi_turn_sessions(40, 6, rng, "a"), multi_turn_sessions(40, 6, rng, "b")
    workers = [AssemblerProcess(settings, tmp_path / f"w{i}") for i in range(2)]
    for worker in workers:
        worker.start()
    try:
        owned = wait_until_shared(workers, 90)
        assert all(owned) and not owned[0] & owned[1], owned  # both hold partitions, none held twice
        truth = expected_trajectories(first)
        publish(settings, codec, as_records(first, rng))
        got = wait_for(settings, codec, "trajectories", len(truth), 90, workers[0])
        time.sleep(2.0)  # a duplicate published late would show up here
        got = wait_for(settings, codec, "trajectories", len(truth), 1, workers[0])
        assert len(got) == len(truth)  # exactly once: nothing lost, nothing twice
        assert {t.event_id: (t.tokens, t.loss_mask, t.logprobs, t.versions) for t in got} == truth

        records = as_records(second, rng)
        publish(settings, codec, records[: len(records) // 2])  # sessions open on both workers
        time.sleep(1.0)
        workers[1].kill9()
        publish(settings, codec, records[len(records) // 2:])
        truth.update(expected_trajectories(second))
        got = wait_for(settings, codec, "trajectories", len(truth), 120, workers[0])
        time.sleep(2.0)
        got = wait_for(settings, codec, "trajectories", len(truth), 1, workers[0])
    finally:
        for worker in workers:
            worker.stop()
    seen: dict[str, tuple] = {}
    for t in got:
        record = (t.tokens, t.loss_mask, t.logprobs, t.versions)
        assert seen.setdefault(t.event_id, record) == record  # a re-published trajectory is an identical copy
    assert seen == truth  # the survivor rebuilt the dead worker's open sessions: nothing lost
    print(f"kill -9 of one of two workers: {len(got) - len(seen)} duplicate(s)")

"""Sessions that end without a reward, through the real assembler process and two reward workers, into the
trainer's batch rules (slow: an assembler process and two workers).

Six sessions in three GRPO groups of two end with reward requests (a right and a wrong answer, a verifier
that hangs, one that raises); one more session scores itself. The self-scored trajectory goes straight to
`trajectories`; the others pass through `to-score`, and each comes out exactly once: scored, or
`unscorable` with its reason and a dead letter. Fed to the trainer's BatchBuilder, every scored trajectory
is trained once with its score, the unscorable ones are counted and still close their groups.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from seamlessflow.core.batching import TRAINABLE_STATUSES, BatchBuilder
from seamlessflow.core.prefix_tree import Call
from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import DeadLetter
from seamlessflow.rewards.request import REQUEST_KEY
from seamlessflow.rewards.verifier_call import start_forkserver
from seamlessflow.rewards.worker import RewardWorker
from seamlessflow.testing.assembler_harness import AssemblerProcess, episode_end, publish, token_io, wait_for
from seamlessflow.testing.core_configs import batch_config
from seamlessflow.testing.reward_worker_harness import REF, Running, options
from seamlessflow.topics import Topics
from seamlessflow.trainer.samples import sample_from_record

pytestmark = pytest.mark.slow

SUBMISSIONS = {"a1": ("ga", "42"), "a2": ("ga", "41"), "b1": ("gb", "42"), "b2": ("gb", "hang"),
               "c1": ("gc", "boom"), "c2": ("gc", "42")}


def session(session_id: str, group: str, submission: str | None):
    call = Call(f"{session_id}-c1.0", [1, 2], [3, 4], [-0.5, -0.25], [0, 0])
    end = dataclasses.replace(episode_end(session_id, reward=0.0 if submission else 0.75), group_id=group)
    if submission is not None:
        request = {"verifier": "exact", "submission": submission, "prompt": "q", "payload": {"answer": "42"}}
        end = dataclasses.replace(end, info_json=json.dumps({REQUEST_KEY: request}))
    return [(session_id, token_io(session_id, call)), (session_id, end)]


def test_sessions_without_rewards_are_scored_once_and_trained_once_or_counted_unscorable(settings, codec, tmp_path):
    start_forkserver(REF)
    records = [r for s, (g, sub) in SUBMISSIONS.items() for r in session(s, g, sub)] + session("self", "gs", None)
    assembler = AssemblerProcess(settings, tmp_path).start()
    workers = [Running(RewardWorker(settings, codec, REF, "teamA", options())) for _ in range(2)]
    try:
        publish(settings, codec, records)
        out = wait_for(settings, codec, "trajectories", len(SUBMISSIONS) + 1, 120, assembler)
    finally:
        for w in workers:
            w.stop()
        assembler.stop()
    by_session = {t.session_id: t for t in out}
    assert len(out) == len(by_session) == 7
    assert (by_session["self"].reward, by_session["self"].status) == (0.75, "done")  # never waited for a score
    assert {s: (t.status, t.reward) for s, t in by_session.items() if s != "self"} == {
        "a1": ("done", 1.0), "a2": ("done", 0.0), "b1": ("done", 1.0), "b2": ("unscorable", 0.0),
        "c1": ("unscorable", 0.0), "c2": ("done", 1.0)}
    assert all(t.tokens == [1, 2, 3, 4] and t.loss_mask == [0, 0, 1, 1] for t in out)
    letters = [m for m in read_messages(settings, Topics(settings).dead_letter, codec) if isinstance(m, DeadLetter)]
    assert sorted(codec.decode(x.value).session_id for x in letters) == ["b2", "c1"]

    builder = BatchBuilder(batch_config(group_size=2, threshold=1, trainable_statuses=frozenset(TRAINABLE_STATUSES)))
    trained = [t.session_id for t in out + out if builder.add(sample_from_record(t), now=0.0)]  # redelivered too
    assert sorted(trained) == ["a1", "a2", "b1", "c2", "self"]
    assert (builder.counters.duplicates, builder.counters.bad_status) == (7, 2)
    kept = builder.poll(current_version=0, now=0.0).batch
    assert [g.group_id for g in kept] == ["ga"]  # gb and gc closed with one trainable sample: no signal

"""The assembler worker through the real broker: bit-exact output, dead letters, idle aborts, kill -9."""

import random
import time
import uuid

import pytest
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st

from seamlessflow.core.prefix_tree import Call
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.testing.assembler_harness import (
    AssemblerProcess,
    as_records,
    expected_trajectories,
    publish,
    token_io,
    wait_for,
)
from seamlessflow.testing.sessions import multi_turn_sessions
from seamlessflow.testing.sessions import sessions as random_sessions
from seamlessflow.topics import Topics

pytestmark = pytest.mark.slow


def by_id(trajectories):
    return {t.event_id: (t.tokens, t.loss_mask, t.logprobs, t.versions) for t in trajectories}


def test_random_sessions_come_out_bit_exact_with_poison_and_duplicates(settings, codec, tmp_path):
    proc = AssemblerProcess(settings, tmp_path).start()
    published = {"n": 0}
    try:
        @hsettings(max_examples=3, deadline=None, suppress_health_check=list(HealthCheck))
        @given(st.lists(random_sessions(max_calls=12), min_size=5, max_size=12), st.randoms())
        def check(session_list, rng):
            run = uuid.uuid4().hex[:6]
            sessions = {f"{run}-{i}": sent for i, sent in enumerate(session_list)}
            calls_only = {sid: list({c.call_id: c for c in sent}.values()) for sid, sent in sessions.items()}
            records = as_records(sessions, rng)  # `sent` already holds exact resends (duplicates)
            publish(settings, codec, records)
            truth = expected_trajectories(calls_only)
            published["n"] += len(truth)
            got = wait_for(settings, codec, "trajectories", published["n"], 120, proc)
            got_run = by_id(t for t in got if t.session_id.startswith(run))
            assert len([t for t in got if t.session_id.startswith(run)]) == len(truth)  # no duplicates
            assert got_run == truth

        check()
        raw = MessageProducer(settings, codec)
        raw.send_bytes(Topics(settings).session_events, b"bad", b"\x07not avro")
        bad_call = Call("x.0", [1], [2, 3], [-0.1], [0])  # one logprob for two tokens
        raw.flush()
        publish(settings, codec, [("s-bad", token_io("s-bad", bad_call))])
        letters = wait_for(settings, codec, "dead_letter", 2, 60, proc)
        reasons = sorted(letter.reason for letter in letters)
        assert any("undecodable" in r for r in reasons) and any("invalid call" in r for r in reasons)
        assert proc.proc.poll() is None  # the worker keeps running
    finally:
        proc.stop()


def test_idle_session_is_closed_as_aborted(settings, codec, tmp_path):
    proc = AssemblerProcess(settings, tmp_path, idle_timeout_s=1.0).start()
    try:
        publish(settings, codec, [("idle", token_io("idle", Call("c1.0", [1, 2], [3], [-0.5], [0])))])
        (traj,) = wait_for(settings, codec, "trajectories", 1, 90, proc)
        assert (traj.session_id, traj.status, traj.tokens) == ("idle", "aborted", [1, 2, 3])
    finally:
        proc.stop()


def test_kill_9_mid_stream_recovers_to_the_truth(settings, codec, tmp_path):
    rng = random.Random(7)
    sessions = multi_turn_sessions(40, 8, rng, "k")
    records = as_records(sessions, rng)
    truth = expected_trajectories(sessions)
    cut = len(records) // 2
    proc = AssemblerProcess(settings, tmp_path, checkpoint_interval_s=0.3).start()
    try:
        publish(settings, codec, records[:cut])
        closed_before = sum(1 for t in truth if t.split("/")[0] in
                            {m.session_id for _, m in records[:cut] if type(m).__name__ == "EpisodeEnd"})
        first = wait_for(settings, codec, "trajectories", closed_before, 90, proc)
        proc.kill9()  # at once: sessions are open and the last outputs may be past the last mark
        publish(settings, codec, records[cut:])
        proc.start()
        got = wait_for(settings, codec, "trajectories", len(truth), 120, proc)
        time.sleep(2.0)  # anything published late would show up as an extra
        got = wait_for(settings, codec, "trajectories", len(truth), 1, proc)
    finally:
        proc.stop()
    seen = {}
    for t in got:
        record = (t.tokens, t.loss_mask, t.logprobs, t.versions)
        assert seen.setdefault(t.event_id, record) == record  # a duplicate is an identical copy
    assert seen == truth  # nothing lost, nothing wrong
    duplicates = len(got) - len(seen)
    print(f"kill -9: {len(first)} trajectories before the crash, {duplicates} duplicate(s) after restart")

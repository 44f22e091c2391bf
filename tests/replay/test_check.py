"""--check logic on in-memory records (the CLI test runs it against the broker)."""

import dataclasses
import struct

from seamlessflow.assembler import AssemblerOptions
from seamlessflow.replay.check import check
from seamlessflow.replay.select import group_sessions
from seamlessflow.testing.replay_samples import expected_two_turn, forked_session, records, two_turn_session

CONFIG = AssemblerOptions()


def run_check(events, stored, codec):
    return check(group_sessions(records(events, codec)), records(stored, codec, topic="t.trajectories"), CONFIG, codec)


def test_stored_trajectory_equal_to_an_independent_answer_passes(codec):
    report = run_check(two_turn_session(), [expected_two_turn()], codec)
    assert report.ok, report.mismatches
    assert (report.sessions_checked, report.trajectories_verified) == (1, 1)


def test_one_flipped_logprob_bit_is_caught(codec):
    good = expected_two_turn()
    bits = struct.unpack("<I", struct.pack("<f", -0.5))[0] ^ 1
    flipped = struct.unpack("<f", struct.pack("<I", bits))[0]
    bad = dataclasses.replace(good, logprobs=[0.0, 0.0, -0.5, flipped, 0.0, -0.5])
    report = run_check(two_turn_session(), [good, bad], codec)
    assert report.trajectories_verified == 1
    (mismatch,) = report.mismatches
    assert mismatch.kind == "differs" and mismatch.detail.startswith("logprobs[3]")


def test_missing_and_unexpected_trajectories_are_reported(codec):
    extra = dataclasses.replace(expected_two_turn(), event_id="s1/7", branch_id=7)
    report = run_check(two_turn_session() + forked_session(), [expected_two_turn(), extra], codec)
    kinds = sorted((m.trajectory_id, m.kind) for m in report.mismatches)
    assert kinds == [("f1/0", "not_stored"), ("f1/1", "not_stored"), ("s1/7", "unexpected")]


def test_open_and_cut_sessions_are_skipped_not_failed(codec):
    events = two_turn_session("s1")[:2] + two_turn_session("s2")[1:]
    report = run_check(events, [], codec)
    assert report.ok and report.sessions_checked == 0
    assert sum(report.skipped.values()) == 2

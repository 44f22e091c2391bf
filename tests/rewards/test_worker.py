"""Reward workers against the real broker: two workers of one pool score unscored trajectories (the second
joins while the first is scoring, so partitions move mid-score); a verifier that hangs, raises or dies
yields one `unscorable` record with its reason and a dead letter; nothing is lost or published twice."""

from __future__ import annotations

import json
import time

from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import DeadLetter
from seamlessflow.rewards.request import REQUEST_KEY
from seamlessflow.rewards.verifier_call import start_forkserver
from seamlessflow.rewards.worker import RewardWorker
from seamlessflow.testing.reward_worker_harness import REF, Running, options, publish, unscored, wait_for_outputs
from seamlessflow.topics import Topics


def test_two_workers_score_each_trajectory_once_and_name_why_the_others_are_unscorable(settings, codec, tmp_path):
    start_forkserver(REF)
    submissions = ["42", "41", "hang", "42", "boom", "die", "42", "41"] + ["slow"] * 4
    payload = {"answer": "42", "marks": str(tmp_path), "slow_s": 4.0}  # slow ones: still scoring when partitions move
    sent = [unscored(f"s{i}", s, payload=payload) for i, s in enumerate(submissions)]
    other_pool = unscored("x", "42", verifier="code")  # another pool's request: skipped here, never published
    publish(settings, codec, [*sent, other_pool])
    workers = [Running(RewardWorker(settings, codec, REF, "default", options()))]
    deadline = time.monotonic() + 60
    while not any(tmp_path.iterdir()):  # the second joins while a slow call runs: partitions move under it
        assert time.monotonic() < deadline, "the first worker never started a slow call"
        time.sleep(0.05)
    workers.append(Running(RewardWorker(settings, codec, REF, "default", options())))
    try:
        # a rebalance under retries, timeouts and sandboxes: minutes on a loaded 2-core machine (90 s fell short)
        out = wait_for_outputs(settings, codec, len(sent), timeout_s=300)
        time.sleep(1.0)  # anything published twice would arrive now
        out = read_messages(settings, Topics(settings).trajectories, codec)
    finally:
        for w in workers:
            w.stop()
    by_id = {t.event_id: t for t in out}
    assert len(out) == len(by_id) == len(sent), "each trajectory exactly once"
    for t, submission in zip(sent, submissions, strict=True):
        got = by_id[t.event_id]
        info = json.loads(got.info_json)
        assert REQUEST_KEY not in info and info["score"]["verifier"] == "exact"
        assert (got.tokens, got.loss_mask, got.versions) == (t.tokens, t.loss_mask, t.versions)
        if submission in ("42", "41", "slow"):
            assert (got.status, got.reward) == ("done", 0.5 if submission == "slow" else float(submission == "42"))
        else:
            assert got.status == "unscorable"
    reasons = {t.session_id: json.loads(by_id[t.event_id].info_json)["score"]["reason"] for t in sent
               if by_id[t.event_id].status == "unscorable"}
    assert reasons["s2"].startswith("timed_out after 1 attempt(s)")
    assert reasons["s4"].startswith("raised after 2 attempt(s): RuntimeError: verifier failed")
    assert reasons["s5"].startswith("crashed after 2 attempt(s)")
    letters = [m for m in read_messages(settings, Topics(settings).dead_letter, codec) if isinstance(m, DeadLetter)]
    assert sorted(codec.decode(letter.value).session_id for letter in letters) == ["s2", "s4", "s5"]
    assert all(letter.reason.startswith("unscorable: ") for letter in letters)
    stats = [w.worker.stats for w in workers]
    assert sum(s.scored for s in stats) == 9 and sum(s.unscorable for s in stats) == 3
    assert sum(s.skipped for s in stats) == 1
    assert sum(s.settled for s in stats) >= 1  # partitions did move mid-score, and what ran was not redone

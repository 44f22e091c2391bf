"""Reward requests: who names the verifier, and what a score or a failure does to a trajectory."""

import dataclasses
import json

from seamlessflow.rewards import ScoreRequest, Unscored
from seamlessflow.rewards.request import REQUEST_KEY, pending_request, request_for, request_of, scored, unscorable
from seamlessflow.testing.reward_worker_harness import unscored


def test_the_agent_names_the_verifier_first_then_the_task_then_the_pool():
    payload = json.dumps({"answer": "7", "verifier": "math"})
    assert request_for(Unscored("7", verifier="code"), "q", payload, "pool").verifier == "code"
    assert request_for(Unscored("7"), "q", payload, "pool").verifier == "math"
    assert request_for(Unscored("7"), "q", "{}", "pool").verifier == "pool"
    request = request_for(Unscored("7"), "q", "not json", None)
    assert (request.verifier, request.payload, request.prompt) == ("default", {}, "q")


def test_a_scored_trajectory_keeps_its_tokens_and_no_longer_waits():
    t = unscored("s", "42")
    assert request_of(t) == ScoreRequest("exact", "42", "q", {"answer": "42"}, "s/0", (1, 2, 3))
    out = scored(t, 0.75, {"worker": "w1"})
    assert pending_request(out.info_json) is None and REQUEST_KEY not in json.loads(out.info_json)
    assert json.loads(out.info_json)["score"] == {"verifier": "exact", "worker": "w1"}
    assert dataclasses.replace(out, reward=0.0, info_json=t.info_json) == t


def test_an_unscorable_trajectory_says_why_and_is_not_trainable():
    out = unscorable(unscored("s", "42"), "timed_out after 1 attempt(s)", {"worker": "w1"})
    assert out.status == "unscorable" and out.reward == 0.0
    assert json.loads(out.info_json)["score"]["reason"] == "timed_out after 1 attempt(s)"

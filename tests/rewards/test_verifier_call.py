"""One verifier call in a child process: answers, raises, hangs past its timeout, dies, exceeds its memory."""

from __future__ import annotations

import time

from seamlessflow.rewards import ScoreRequest
from seamlessflow.rewards.verifier_call import CRASHED, OK, RAISED, TIMED_OUT, Limits, run_verifier, start_forkserver

REF = "seamlessflow.testing.verifiers:exact"


def setup_module():
    start_forkserver(REF)


def call(submission: str, timeout_s: float = 10.0, memory_mb: int | None = 512):
    request = ScoreRequest("exact", submission, payload={"answer": "42"}, trajectory_id="s/0")
    return run_verifier(REF, request, Limits(timeout_s, memory_mb))


def test_an_answer_comes_back_with_its_info():
    right, wrong = call("42"), call("41")
    assert (right.outcome, right.reward, right.info) == (OK, 1.0, {"checked": "s/0"})
    assert (wrong.outcome, wrong.reward) == (OK, 0.0)


def test_a_raise_is_reported_with_its_type():
    verdict = call("boom")
    assert verdict.outcome == RAISED and verdict.error.startswith("RuntimeError: verifier failed")


def test_a_hang_is_killed_at_the_timeout():
    started = time.monotonic()
    verdict = call("hang", timeout_s=1.0)
    assert verdict.outcome == TIMED_OUT and "1 s" in verdict.error
    assert time.monotonic() - started < 5.0


def test_a_dying_interpreter_is_an_outcome_not_the_callers_death():
    verdict = call("die")
    assert verdict.outcome == CRASHED and "exit code 3" in verdict.error


def test_the_memory_limit_stops_a_verifier_that_allocates_too_much():
    limited = call("hog", memory_mb=256)
    assert limited.outcome == RAISED and limited.error.startswith("MemoryError")


def test_the_example_verifiers_score_in_the_sandbox():
    examples = "services.agents.examples.verifiers"
    start_forkserver(f"{examples}:arithmetic")  # the server already runs: this module is imported per call
    arithmetic = run_verifier(f"{examples}:arithmetic", ScoreRequest("arithmetic", "It is 42.", payload={"answer": 42}),
                              Limits(30.0, 1024))
    assert (arithmetic.outcome, arithmetic.reward) == (OK, 1.0)
    code = ScoreRequest("code", "```python\ndef double(x):\n    return 2 * x\n```",
                        payload={"function": "double", "tests": [[[1], 2], [[3], 6], [[0], 1]]})
    verdict = run_verifier(f"{examples}:code_tests", code, Limits(60.0, 1024))
    assert (verdict.outcome, round(verdict.reward, 3), verdict.info) == (OK, 0.667, {"environment": "ran"})

"""One verifier call in a sandboxed child process (seamlessflow/child_call.py): time and memory limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from seamlessflow import child_call
from seamlessflow.child_call import CRASHED, OK, RAISED, TIMED_OUT, Limits
from seamlessflow.rewards.request import ScoreRequest
from seamlessflow.user_code import load_function, parse_result

__all__ = ["CRASHED", "OK", "RAISED", "TIMED_OUT", "Limits", "Verdict", "run_verifier", "start_forkserver"]


@dataclass(frozen=True)
class Verdict:
    """One call's outcome: `reward` and `info` when `outcome == "ok"`, else `error` says what happened."""

    outcome: str
    reward: float = 0.0
    info: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    elapsed_s: float = 0.0


def _verify(reference: str, request: ScoreRequest) -> tuple[float, dict]:
    return parse_result(load_function(reference)(request))


def start_forkserver(reference: str) -> None:
    """The fork server with this module and the verifier's module imported once."""
    module = reference.rpartition(":")[0]
    child_call.start_forkserver([__name__] + ([module] if module and not module.endswith(".py") else []))


def run_verifier(reference: str, request: ScoreRequest, limits: Limits) -> Verdict:
    """Never raises for the verifier's sake: a hang is killed at `timeout_s` and reported as `timed_out`."""
    result = child_call.call_in_child(_verify, (reference, request), limits, what="verifier")
    if result.outcome != OK:
        return Verdict(result.outcome, error=result.error, elapsed_s=result.elapsed_s)
    reward, info = result.value
    return Verdict(OK, reward, info, elapsed_s=result.elapsed_s)

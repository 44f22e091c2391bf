"""How a session asks to be scored later, and what a score does to its trajectories.

Why in the records themselves: a session that ends without a reward carries its *reward request* (which
verifier, what to score, the task's payload) in its EpisodeEnd's `info_json`; the assembler copies it into
each trajectory's `info_json` and sends those trajectories to the `to-score` topic instead of
`trajectories`. A reward worker reads them there and publishes each once, to `trajectories`, either
scored (`reward` set, the request replaced by what scored it) or `unscorable` with the reason (a status
no trainer trains and the rollout manager counts as its group's session ending). No schema change, and
agents that compute their own reward are untouched: their records carry no request.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from seamlessflow.core.episodes import TrajectoryStatus
from seamlessflow.messages import Trajectory

REQUEST_KEY = "reward_request"
SCORE_KEY = "score"
UNSCORABLE = TrajectoryStatus.UNSCORABLE
DEFAULT_VERIFIER = "default"


@dataclass(frozen=True)
class Unscored:
    """What an agent returns to end its session without a reward: `submission` is what the verifier
    judges (the final answer, the program); `verifier` defaults to the task's, then the pool's."""

    submission: str
    verifier: str | None = None
    info: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ScoreRequest:
    """What a verifier function receives: `fn(request) -> reward | (reward, info)`, or raises."""

    verifier: str
    submission: str
    prompt: str = ""
    payload: dict[str, Any] = field(default_factory=dict)
    trajectory_id: str = ""
    tokens: tuple[int, ...] = ()  # the trajectory's tokens, for verifiers that judge the whole exchange

    def as_info(self) -> dict[str, Any]:
        return {"verifier": self.verifier, "submission": self.submission, "prompt": self.prompt,
                "payload": self.payload}


def request_for(unscored: Unscored, prompt: str, payload_json: str, pool_verifier: str | None) -> ScoreRequest:
    """The agent's choice, else the task payload's `"verifier"`, else the pool's, else `default`."""
    try:
        payload = json.loads(payload_json or "{}")
    except ValueError:
        payload = {}
    payload = payload if isinstance(payload, dict) else {"value": payload}
    verifier = unscored.verifier or payload.get("verifier") or pool_verifier or DEFAULT_VERIFIER
    return ScoreRequest(str(verifier), unscored.submission, prompt, payload)


def pending_request(info_json: str) -> dict[str, Any] | None:
    """The reward request a record carries, if it still waits for a score."""
    try:
        info = json.loads(info_json or "{}")
    except ValueError:
        return None
    request = info.get(REQUEST_KEY) if isinstance(info, dict) else None
    return request if isinstance(request, dict) else None


def request_of(trajectory: Trajectory) -> ScoreRequest | None:
    request = pending_request(trajectory.info_json)
    if request is None:
        return None
    payload = request.get("payload")
    return ScoreRequest(str(request.get("verifier") or DEFAULT_VERIFIER), str(request.get("submission", "")),
                        str(request.get("prompt", "")), payload if isinstance(payload, dict) else {},
                        trajectory.event_id, tuple(trajectory.tokens))


def scored(trajectory: Trajectory, reward: float, score_info: dict[str, Any]) -> Trajectory:
    """The trajectory with its reward; the request gives way to what scored it (so it is not scored again)."""
    return dataclasses.replace(trajectory, reward=reward, info_json=_resolved(trajectory, score_info))


def unscorable(trajectory: Trajectory, reason: str, score_info: dict[str, Any]) -> Trajectory:
    """The trajectory marked unscorable with the reason; never trained, still closes its group."""
    return dataclasses.replace(trajectory, status=UNSCORABLE,
                               info_json=_resolved(trajectory, {**score_info, "reason": reason}))


def _resolved(trajectory: Trajectory, score_info: dict[str, Any]) -> str:
    info = json.loads(trajectory.info_json or "{}")
    request = info.pop(REQUEST_KEY, {}) or {}
    info[SCORE_KEY] = {"verifier": request.get("verifier"), **score_info}
    return json.dumps(info, sort_keys=True)

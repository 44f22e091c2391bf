"""A session as turns with its token boundaries: which prompt tokens the session already held, which
were fed in new (user, tool, rewritten text), which the policy generated (with versions and logprobs).

Pure. The outcome of each call (start, extension, fork, restart, duplicate) comes from the same core
assembler the stream job runs, so what a user sees is what assembly did.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

from seamlessflow.assembler.convert import call_from_token_io
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.core.assembler import SessionAssembler
from seamlessflow.core.prefix_tree import InvalidCall
from seamlessflow.messages import Trajectory
from seamlessflow.replay.select import SessionEvents


@dataclass(frozen=True)
class Turn:
    index: int
    call_id: str
    event_id: str
    engine_id: str
    outcome: str
    known: int  # prompt tokens already in the session (longest prefix of an earlier sequence)
    fed: list[int]  # prompt tokens after the known prefix
    generated: list[int]
    logprobs: list[float]
    versions: list[int]
    finish_reason: str
    reward: float | None = None  # the reward the agent gave this call (by its id or its position), if any


@dataclass(frozen=True)
class Segment:
    """A run of a trajectory's tokens that are all fed (mask 0) or all generated (mask 1)."""

    kind: str  # fed | generated
    start: int
    tokens: list[int]
    logprobs: list[float]
    versions: list[int]


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def call_reward(call_rewards: dict[str, float], request_id: str, position: int) -> float | None:
    """What the agent gave a request, named by its id or by ``#<position>`` as the assembler reads them."""
    return call_rewards.get(request_id, call_rewards.get(f"#{position}"))


def session_turns(session: SessionEvents) -> list[Turn]:
    assembler = SessionAssembler(AssemblerOptions().assembler_config())
    history: list[list[int]] = []
    turns = []
    rewards = session.end.call_rewards if session.end else {}
    positions: dict[str, int] = {}
    for index, call in enumerate(session.calls):
        position = positions.setdefault(call.call_id, len(positions))
        core_call = call_from_token_io(call)
        try:
            core_call = assembler.resolve(core_call)  # a prompt recorded as a delta, made whole
            outcome = assembler.add(core_call).value
        except InvalidCall as exc:
            outcome = f"invalid ({exc})"
        prompt = list(core_call.prompt_ids)
        known = max((common_prefix(prompt, seq) for seq in history), default=0)
        history.append(prompt + list(call.completion_ids))
        turns.append(Turn(index, call.call_id, call.event_id, call.engine_id, outcome, known, prompt[known:],
                          list(call.completion_ids), list(call.logprobs), list(call.versions), call.finish_reason,
                          call_reward(rewards, call.call_id, position)))
    return turns


def segments(trajectory: Trajectory) -> list[Segment]:
    out: list[Segment] = []
    for i, (token, mask) in enumerate(zip(trajectory.tokens, trajectory.loss_mask, strict=False)):
        kind = "generated" if mask else "fed"
        if not out or out[-1].kind != kind:
            out.append(Segment(kind, i, [], [], []))
        out[-1].tokens.append(token)
        out[-1].logprobs.append(trajectory.logprobs[i])
        out[-1].versions.append(trajectory.versions[i])
    return out


def session_json(session: SessionEvents) -> dict:
    end = session.end
    first = session.records[0].message
    return {
        "type": "session", "session_id": session.session_id, "team": first.team, "run": first.run,
        "status": session.status, "reward": end.reward if end else None,
        "group_id": end.group_id if end else None, "task_id": end.task_id if end else None,
        "info_json": end.info_json if end else None,
        "call_rewards": dict(end.call_rewards) if end else {},
        "turns": [asdict(t) for t in session_turns(session)],
    }


def trajectory_json(trajectory: Trajectory) -> dict:
    fields = {k: v for k, v in asdict(trajectory).items() if k not in ("tokens", "loss_mask", "logprobs", "versions")}
    return {"type": "trajectory", **fields, "length": len(trajectory.tokens),
            "segments": [asdict(s) for s in segments(trajectory)]}

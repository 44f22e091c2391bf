"""Between message dataclasses and the pure core's types. No re-tokenisation: ids are copied as they are."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace

from seamlessflow.core.assembler import AssembledSequence, Attempt, Provenance, Turns
from seamlessflow.core.episodes import TrajectoryStatus
from seamlessflow.core.prefix_tree import Call, PromptBase
from seamlessflow.core.sampling import LogprobSpace
from seamlessflow.messages import EpisodeEnd, TokenIO, Trajectory


def call_from_token_io(record: TokenIO) -> Call:
    """One choice of one engine call. The event id (call id + choice) is the de-duplication key; a prompt
    recorded as a delta keeps its base, which the session's assembler resolves."""
    base = PromptBase(record.prompt_base_id, record.prompt_base_tokens) if record.prompt_base_id is not None else None
    return Call(record.event_id, record.prompt_ids, record.completion_ids, record.logprobs, record.versions, base)


def provenance_of(record: TokenIO) -> Provenance:
    """The adapter that served the record and the temperature its logprobs are at: its sampling temperature where
    they are "processed"; 1.0 for "raw" ones (every record before the field), which are at temperature 1 whatever
    the call sampled at, so the trainer must not divide its own logits for them."""
    temperature = float(record.temperature) if record.logprob_space == LogprobSpace.PROCESSED else 1.0
    return Provenance(record.adapter, temperature)


def attempt_of(record: TokenIO) -> Attempt:
    """The request the record answered (the proxy's call id: a client's retries share it) and the attempt."""
    return Attempt(record.call_id, record.attempt)


def with_whole_prompts(records: Iterable[TokenIO]) -> list[TokenIO]:
    """The records, in their order, with every prompt recorded as a delta made whole from the earlier records
    of its session (a base not among them raises KeyError). For readers that look at calls one by one
    (tests, tools); the assembler resolves against its sessions' trees instead."""
    sequences: dict[tuple[str, str], list[int]] = {}
    out = []
    for record in records:
        if record.prompt_base_id is not None:
            base = sequences[record.session_id, record.prompt_base_id]
            record = replace(record, prompt_ids=base[: record.prompt_base_tokens] + list(record.prompt_ids),
                             prompt_base_id=None, prompt_base_tokens=0)
        sequences.setdefault(
            (record.session_id, record.event_id), list(record.prompt_ids) + list(record.completion_ids)
        )
        out.append(record)
    return out


def trajectory_id(session_id: str, branch_id: int) -> str:
    """Stable across replays: the key a consumer de-duplicates on."""
    return f"{session_id}/{branch_id}"


def trajectory_of(
    seq: AssembledSequence, end: EpisodeEnd, status: TrajectoryStatus, num_calls: int, info: dict | None = None,
    turns: Turns | None = None,
) -> Trajectory:
    """A Trajectory record for one leaf. Every field derives from the input, so a replay yields equal records."""
    return Trajectory(
        event_id=trajectory_id(end.session_id, seq.branch_id),
        session_id=end.session_id,
        branch_id=seq.branch_id,
        group_id=end.group_id or end.session_id,
        task_id=end.task_id or "",
        team=end.team,
        run=end.run,
        tokens=seq.tokens,
        loss_mask=seq.loss_mask,
        logprobs=seq.logprobs,
        versions=seq.versions,
        reward=end.reward,
        status=status,
        num_calls=num_calls,
        num_forks=seq.fork_count,
        created_at_ms=end.created_at_ms,
        info_json=json.dumps(info or {}, sort_keys=True),
        turn_ends=list(turns.ends) if turns else [],
        turn_rewards=list(turns.rewards) if turns else [],
        adapter=seq.adapter,
        temperatures=seq.temperatures,
        masked_tokens=seq.masked_tokens,
    )

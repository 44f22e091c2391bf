"""The audit: what the topics and the trainer's step log must show after any run, faults or not.

It trusts no service: it reads what is durable (records on the topics, the fsynced step log, and the
driver's own ledger of calls the proxy acknowledged) and re-derives the trajectories with its own
longest-prefix matching (`oracle.py`). Re-deliveries that Kafka's at-least-once paths allow (a record
published again with the same id and contents) are counted, not failed; anything lost, invented, changed,
or trained twice is a violation. A role's process frozen and replaced (a zombie, `Zombie`) must have written
nothing after its replacement began, let the trainer's committed offsets go back, or outlived its waking.
Provenance is judged too: each trajectory names the adapter of the calls that generated it and carries their
temperatures, a leaf two adapters generated is dead-lettered and never published, every call names its team's
adapter (`served`), and no trainer trained another policy's samples (`adapters.py`).
Pure: records in, a report out.
"""

from __future__ import annotations

import dataclasses
import json
import math
import struct
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from seamlessflow.chaos.adapters import TeamAdapters, check_adapters, check_base_trained, check_served
from seamlessflow.chaos.oracle import Leaf, OracleCall, derive
from seamlessflow.chaos.stored import AckedResponse
from seamlessflow.core.sampling import LogprobSpace
from seamlessflow.kafka.fencing import FENCED_EXIT_CODE, WRITER_HEADER
from seamlessflow.kafka.io import Record
from seamlessflow.messages import DeadLetter, EpisodeEnd, TokenIO, Trajectory, WeightVersion
from seamlessflow.rewards.request import SCORE_KEY, UNSCORABLE, pending_request

SCORING_DETAILS = ("worker", "attempts", "elapsed_s")  # which worker scored, how often, how long: may differ
MIXED_ADAPTERS = "calls of different adapters"  # what the assembler's dead letter of such a leaf says


@dataclass(frozen=True)
class AckedCall:
    """A call as its agent saw it: the prompt ids it sent and the completion ids of each choice it got."""

    session_id: str
    prompt: tuple[int, ...]
    completions: tuple[tuple[int, ...], ...]


@dataclass(frozen=True)
class Zombie:
    """A single-writer role's process that the chaos run froze, replaced and woke (schedule.REPLACE)."""

    service: str
    writers: tuple[str, ...]  # `host:pid` of the frozen process and of each process below it (a launcher's ranks)
    replaced_ms: int  # when its replacement was started
    resumed_ms: int = 0  # when it was woken (0: never)
    took_over: bool = True  # the replacement held the role before the old one was woken
    exited: bool = False  # gone after waking, within the run's wait
    exit_code: int | None = None  # None: unknown (not our child, or stopped with the stack)
    offsets_at_resume: dict[int, int] = field(default_factory=dict)  # the role's committed offsets, partition ->
    offsets_after: dict[int, int] = field(default_factory=dict)  # offset, as it woke and once it was gone


@dataclass(frozen=True)
class Ledger:
    """What the proxy acknowledged to the driver's agents: calls, the sessions it ended and the responses it
    stored (read back through the proxy, not from the topics: `stored.py`); and the zombies the run made."""

    calls: tuple[AckedCall, ...] = ()
    ends: tuple[str, ...] = ()
    zombies: tuple[Zombie, ...] = ()
    responses: tuple[AckedResponse, ...] = ()


@dataclass(frozen=True)
class Rules:
    """The assembler settings that decide which leaves become trajectories."""

    max_tokens: int = 1 << 20
    longest_only: bool = False
    keep_aborted: bool = True


@dataclass(frozen=True)
class Violation:
    kind: str
    detail: str


@dataclass
class AuditReport:
    counts: Counter = field(default_factory=Counter)
    violations: list[Violation] = field(default_factory=list)
    dead_letters: Counter = field(default_factory=Counter)  # (service, reason) -> letters

    @property
    def ok(self) -> bool:
        return not self.violations

    def fail(self, kind: str, detail: str) -> None:
        self.violations.append(Violation(kind, detail))


@dataclass
class _Session:
    calls: list[OracleCall] = field(default_factory=list)
    late_calls: int = 0
    end: EpisodeEnd | None = None
    end_at: tuple[str, int, int] = ("", -1, -1)  # where `end` was read: the assembler's letters about it point there
    end_ids: set[str] = field(default_factory=set)
    sequences: dict[str, list[int]] = field(default_factory=dict)  # event id -> prompt + completion (for deltas)


def audit(session_events: Sequence[Record], trajectories: Sequence[Record], dead_letters: Sequence[Record] = (),
          weights: Sequence[Record] = (), steps: Sequence[dict] | None = None, ledger: Ledger | None = None,
          rules: Rules = Rules(), role_records: Sequence[Record] = (), adapters: TeamAdapters | None = None,
          served: Mapping[str, str] | None = None) -> AuditReport:
    """`role_records`: what the single-writer roles write besides `weights` (commands, tasks, status), with
    their headers, for the zombie rule. `adapters`: a stack that trains teams' adapters (`TeamAdapters`); its
    trainers' step logs stand for `steps`, its teams' adapters for `served`. `served`: each team's adapter
    (`proxy.teams.<team>.lora.name`; a team absent is served the base) in a stack that trains the base; None: not
    known, the calls' adapters are not judged."""
    report = AuditReport()
    letters = _dead_letters(dead_letters, report)
    sessions, token_ids = _sessions(session_events, letters, report)
    if ledger is not None:
        _check_ledger(ledger, token_ids, sessions, report)
    stored = _stored_trajectories(trajectories, report)
    _check_trajectories(sessions, stored, letters, rules, report)
    served = adapters.names if adapters is not None else served
    if served is not None:
        check_served(served, token_ids.values(), report)
    if adapters is not None:
        _check_steps(list(adapters.steps.values()), stored, report)
        check_adapters(adapters, stored, weights, report)
    elif steps is not None:
        _check_steps([steps], stored, report)
        check_base_trained(steps, stored, report)
    _check_versions(weights, report)
    for zombie in ledger.zombies if ledger is not None else ():
        check_zombie(zombie, [*weights, *dead_letters, *role_records], report)
    return report


def check_zombie(zombie: Zombie, records: Iterable[Record], report: AuditReport) -> None:
    """One writer per role held through a freeze: the replacement held the role before the old process woke,
    nothing the old one wrote after the replacement began is committed (every role record names its writer),
    the committed offsets did not go back, and the old one exited once woken (fenced, mostly: one frozen in its
    start may fail on a stale connection first; what matters is that it wrote nothing and is gone)."""
    report.counts["zombies (frozen, replaced, woken)"] += 1
    what = f"{zombie.service} {'/'.join(zombie.writers[:1])}"
    if not zombie.took_over:
        report.fail("zombie not replaced", f"{what}: its replacement never held the role before it was woken")
    writers = {w.encode() for w in zombie.writers}
    for record in records:
        if (record.headers or {}).get(WRITER_HEADER) not in writers:
            continue
        if record.timestamp_ms < zombie.replaced_ms:
            report.counts["records by zombies before their replacement"] += 1
        else:
            report.fail("zombie wrote", f"{what}: {type(record.message).__name__} {record.topic}[{record.partition}]"
                                        f"@{record.offset} at {record.timestamp_ms}, after its replacement began "
                                        f"at {zombie.replaced_ms}")
    back = {p: (o, zombie.offsets_after.get(p, 0)) for p, o in zombie.offsets_at_resume.items()
            if zombie.offsets_after.get(p, 0) < o}
    if back:
        report.fail("committed offsets went back", f"{what}: partition -> (as it woke, after): {back}")
    if not zombie.exited:
        report.fail("zombie lived on", f"{what}: woken at {zombie.resumed_ms}, still running")
    elif zombie.exit_code != FENCED_EXIT_CODE:  # gone all the same: woken mid-start, its stale sockets can fail first
        report.counts[f"zombies exited with {zombie.exit_code} (not fenced)"] += 1


def _dead_letters(records: Iterable[Record], report: AuditReport) -> dict[tuple[str, int, int], list[DeadLetter]]:
    """Letters by (source topic, partition, offset) (an episode end may give several: one per leaf refused);
    counted by service and the head of the reason."""
    out: dict[tuple[str, int, int], list[DeadLetter]] = {}
    for record in records:
        letter = record.message
        if not isinstance(letter, DeadLetter):
            report.fail("dead-letter topic", f"record @{record.offset} is not a DeadLetter: {record.error}")
            continue
        report.dead_letters[(letter.service, letter.reason.split(":")[0][:60])] += 1
        out.setdefault((letter.source_topic, letter.partition, letter.offset), []).append(letter)
    return out


def _sessions(
    records: Iterable[Record], letters: dict, report: AuditReport
) -> tuple[dict[str, _Session], dict[str, TokenIO]]:
    """Sessions from the events, and each distinct TokenIO (first copy) with its prompt made whole."""
    sessions: dict[str, _Session] = {}
    first: dict[str, TokenIO] = {}
    for record in records:
        report.counts["session-events records"] += 1
        message = record.message
        if isinstance(message, TokenIO):
            session = sessions.setdefault(message.session_id, _Session())
            if message.event_id in first:
                report.counts["token I/O re-sent with the same id (first kept)"] += 1
                continue
            message = _whole_prompt(message, session, report)
            first[message.event_id] = message
            if session.end is not None:
                session.late_calls += 1
                continue
            session.calls.append(OracleCall(message.event_id, message.prompt_ids, message.completion_ids,
                                            message.logprobs, message.versions, message.call_id, message.attempt,
                                            message.adapter, _temperature(message)))
        elif isinstance(message, EpisodeEnd):
            session = sessions.setdefault(message.session_id, _Session())
            if message.event_id in session.end_ids:
                report.counts["episode ends re-sent with the same id"] += 1
            elif session.end is not None:
                report.counts["second episode ends (ignored)"] += 1
            else:
                session.end, session.end_at = message, (record.topic, record.partition, record.offset)
            session.end_ids.add(message.event_id)
        elif (record.topic, record.partition, record.offset) in letters:
            report.counts["poison records dead-lettered"] += 1
        else:
            report.fail("poison kept", f"{record.topic}[{record.partition}]@{record.offset} is unusable "
                                       f"({record.error or type(message).__name__}) and no service dead-lettered it")
    report.counts["choices recorded (distinct ids)"] = len(first)
    report.counts["sessions ended"] = sum(1 for s in sessions.values() if s.end is not None)
    report.counts["sessions still open"] = sum(1 for s in sessions.values() if s.end is None)
    report.counts["calls after their session's end"] = sum(s.late_calls for s in sessions.values())
    return sessions, first


def _temperature(message: TokenIO) -> float:
    """The temperature the record's logprobs are at: its sampling temperature where they are processed, 1.0 where
    raw (every record before the field), as a trajectory's float32 carries it."""
    return _float32(message.temperature) if message.logprob_space == LogprobSpace.PROCESSED else 1.0


def _float32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


def _whole_prompt(message: TokenIO, session: _Session, report: AuditReport) -> TokenIO:
    """A prompt recorded as a delta, rebuilt from the session's earlier records alone (flat lists: not the
    assembler's code); every record's sequence is kept for the deltas after it."""
    if message.prompt_base_id is not None:
        base = session.sequences.get(message.prompt_base_id)
        if base is None or len(base) < message.prompt_base_tokens:
            report.fail("unresolvable prompt", f"session {message.session_id}: {message.event_id} starts with "
                                               f"{message.prompt_base_tokens} ids of {message.prompt_base_id}, "
                                               "which is not on the topic before it")
            base = []
        report.counts["prompts recorded as deltas"] += 1
        message = dataclasses.replace(message, prompt_ids=base[: message.prompt_base_tokens] + list(message.prompt_ids),
                                      prompt_base_id=None, prompt_base_tokens=0)
    session.sequences[message.event_id] = list(message.prompt_ids) + list(message.completion_ids)
    return message


def _check_ledger(
    ledger: Ledger, token_ids: dict[str, TokenIO], sessions: dict[str, _Session], report: AuditReport
) -> None:
    """Each acknowledged choice must match one distinct recorded call of its session, token for token."""
    recorded: Counter = Counter(
        (t.session_id, tuple(t.prompt_ids), tuple(t.completion_ids)) for t in token_ids.values()
    )
    for call in ledger.calls:
        report.counts["acknowledged calls"] += 1
        for index, completion in enumerate(call.completions):
            key = (call.session_id, call.prompt, completion)
            if recorded[key] > 0:
                recorded[key] -= 1
            else:
                report.fail("acknowledged call lost", f"session {call.session_id}: choice {index} of a call with "
                                                      f"{len(call.prompt)} prompt ids has no matching token I/O")
    for session_id in ledger.ends:
        report.counts["acknowledged episode ends"] += 1
        if sessions.get(session_id, _Session()).end is None:
            report.fail("acknowledged end lost", f"session {session_id}: no episode end on the topic")


def _stored_trajectories(records: Iterable[Record], report: AuditReport) -> dict[str, Trajectory]:
    stored: dict[str, Trajectory] = {}
    for record in records:
        report.counts["trajectory records"] += 1
        t = record.message
        if not isinstance(t, Trajectory):
            report.fail("trajectories topic", f"@{record.offset}: not a Trajectory ({record.error})")
            continue
        if t.event_id not in stored:
            stored[t.event_id] = t
        elif _bits(stored[t.event_id]) == _bits(t):
            report.counts["trajectories re-published (same id and contents)"] += 1
        elif _bits(_scoring_blind(stored[t.event_id])) == _bits(_scoring_blind(t)):
            report.counts["trajectories scored again (same reward and contents)"] += 1
        else:
            report.fail(
                "duplicate trajectory differs", f"{t.event_id}: two records with this id and different contents"
            )
    return stored


def _check_trajectories(sessions: dict[str, _Session], stored: dict[str, Trajectory], letters: dict, rules: Rules,
                        report: AuditReport) -> None:
    expected: set[str] = set()
    for session_id, session in sessions.items():
        end = session.end
        if end is None or (end.status == "aborted" and not rules.keep_aborted):
            continue
        derived = derive(session.calls, rules.max_tokens)
        leaves = [(branch, leaf) for branch, leaf in enumerate(derived.leaves) if branch not in derived.abandoned]
        if rules.longest_only and leaves:
            leaves = [max(leaves, key=lambda bl: (len(bl[1].tokens), -bl[0]))]
        status = "truncated" if derived.truncated else end.status
        for branch, leaf in leaves:
            tid = f"{session_id}/{branch}"
            if len(leaf.sampled_by()) > 1:
                _check_mixed(tid, leaf, stored.get(tid), letters.get(session.end_at, []), report)
                continue
            expected.add(tid)
            got = stored.get(tid)
            if got is None:
                report.fail("trajectory missing", f"{tid}: session ended, leaf {branch} never published")
            else:
                problems = _differences(leaf, end, status, derived.calls, got)
                if problems:
                    report.fail("trajectory differs", f"{tid}: " + "; ".join(problems))
                else:
                    report.counts["trajectories verified bit-exact"] += 1
    for tid in sorted(set(stored) - expected):
        report.fail("unexpected trajectory", f"{tid}: no ended session's events give this trajectory")


def _check_mixed(tid: str, leaf: Leaf, got: Trajectory | None, letters: Sequence[DeadLetter],
                 report: AuditReport) -> None:
    """A leaf whose tokens calls of two adapters (or an adapter and the base) generated is no one policy's sample:
    the assembler must dead-letter its session's end for it (naming the branch), never publish it under one."""
    names = sorted(map(str, leaf.sampled_by()))
    if got is not None:
        report.fail("trajectory of mixed adapters published", f"{tid}: generated by {names}, published as "
                                                              f"{got.adapter!r}")
        return
    branch = tid.rsplit("/", 1)[1]
    if any(f"branch {branch}: {MIXED_ADAPTERS}" in letter.reason for letter in letters):
        report.counts["leaves of mixed adapters dead-lettered"] += 1
    else:
        report.fail("trajectory missing", f"{tid}: generated by {names}, neither published nor dead-lettered")


def _differences(leaf: Leaf, end: EpisodeEnd, status: str, calls: int, got: Trajectory) -> list[str]:
    n = leaf.exact_from  # labels before it are one of several valid ones (twin histories; see oracle.py)
    [adapter] = leaf.sampled_by()
    want = {
        "tokens": leaf.tokens,
        "loss_mask": leaf.mask[n:],
        "logprobs": leaf.logprobs[n:],
        "versions": leaf.versions[n:],
        "reward": end.reward,
        "status": status,
        "group_id": end.group_id or end.session_id,
        "task_id": end.task_id or "",
        "team": end.team,
        "run": end.run,
        "num_calls": calls,
        "adapter": adapter,
        "temperatures": leaf.temperatures[n:],
        "masked_tokens": sum(1 for m, lp in zip(got.loss_mask, got.logprobs, strict=False) if m and math.isnan(lp)),
    }
    problems = []
    if pending_request(end.info_json) is not None:  # the session asked a reward worker for its reward
        del want["reward"]
        if got.status == UNSCORABLE:
            del want["status"]
        if not _was_scored(got):
            problems.append("published with its reward request unanswered")
    labels = ("loss_mask", "logprobs", "versions", "temperatures")
    return problems + [f"{name} differs" for name, value in want.items()
                       if _bits(value) != _bits(_got(got, name)[n:] if name in labels else _got(got, name))]


def _got(t: Trajectory, name: str) -> Any:
    """A trajectory's field; `temperatures` as one per token (empty on the record: 1.0 everywhere)."""
    if name == "temperatures" and not t.temperatures:
        return [1.0] * len(t.tokens)
    return getattr(t, name)


def _was_scored(t: Trajectory) -> bool:
    """A reward worker answered: the request gave way to what scored it (seamlessflow.rewards.request)."""
    try:
        info = json.loads(t.info_json or "{}")
    except ValueError:
        return False
    return isinstance(info, dict) and isinstance(info.get(SCORE_KEY), dict) and pending_request(t.info_json) is None


def _scoring_blind(t: Trajectory) -> Trajectory:
    """The trajectory without which worker scored it, after how many attempts and how long: two workers that
    scored the same record (one died before committing) agree on everything else, the reward included."""
    try:
        info = json.loads(t.info_json or "{}")
    except ValueError:
        return t
    score = info.get(SCORE_KEY) if isinstance(info, dict) else None
    if not isinstance(score, dict):
        return t
    info[SCORE_KEY] = {k: v for k, v in score.items() if k not in SCORING_DETAILS}
    return dataclasses.replace(t, info_json=json.dumps(info, sort_keys=True))


def _check_steps(logs: Sequence[Sequence[dict]], stored: dict[str, Trajectory], report: AuditReport) -> None:
    """Every trainer's step log (one, or one per adapter): a trajectory in two steps of any was trained twice."""
    trained: Counter = Counter(tid for steps in logs for step in steps for tid in step.get("trajectory_ids", []))
    report.counts["training steps"] = sum(len(steps) for steps in logs)
    report.counts["trajectories trained"] = len(trained)
    report.counts["trajectories not trained (pending or discarded)"] = len(set(stored) - set(trained))
    for tid, n in sorted(trained.items()):
        if n > 1:
            report.fail("trained twice", f"{tid} is in {n} durable steps")
        if tid not in stored:
            report.fail("trained unknown", f"{tid} was trained but is not on the trajectories topic")
    for steps in logs:
        numbers = [step.get("step", 0) for step in steps]
        if any(b <= a for a, b in zip(numbers, numbers[1:], strict=False)):
            report.fail("step log order", f"step numbers do not increase: {numbers}")
        versions = [step.get("version", 0) for step in steps]
        if any(b < a for a, b in zip(versions, versions[1:], strict=False)):
            report.fail("version went back", f"step log versions: {versions}")


def _check_versions(weights: Iterable[Record], report: AuditReport) -> None:
    highest: dict[str, int] = {}
    for record in weights:
        w = record.message
        if not isinstance(w, WeightVersion):
            continue
        report.counts["weight versions published"] += 1
        top = highest.get(w.trainer_id, 0)
        if w.version < top:
            report.fail("version went back", f"{w.trainer_id} published v{w.version} after v{top}")
        elif w.version == top:
            report.counts["weight versions re-published after a restart"] += 1
        highest[w.trainer_id] = max(top, w.version)


def _bits(value: object) -> object:
    """Floats by their bits (any NaN == any NaN: a logprob the engine did not give; -0.0 != 0.0); dataclasses
    field by field."""
    if isinstance(value, float):
        return b"nan" if math.isnan(value) else struct.pack("<d", value)
    if isinstance(value, list | tuple):
        return [_bits(v) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        return [(f.name, _bits(getattr(value, f.name))) for f in fields(value)]  # type: ignore[arg-type]
    return value

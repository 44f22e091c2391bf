"""`replay --check`: assemble the raw session events again and compare with the stored trajectories.

Assembly runs through the same `SessionBook` and pure core the assembler service uses, with the same
`assembler:` settings, so every Trajectory field (tokens, mask, float32 logprobs, versions, reward, status,
counts, info) must come out identical. Floats are compared by their bits. Stored duplicates (at-least-once
delivery) are each compared. Sessions cut by the reading window, and still open sessions, are skipped.
"""

from __future__ import annotations

import dataclasses
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field

from seamlessflow.assembler import AssemblerOptions, SessionBook
from seamlessflow.avro import Codec
from seamlessflow.kafka.io import Record
from seamlessflow.messages import Trajectory
from seamlessflow.replay.select import SessionEvents

LIST_FIELDS = ("tokens", "loss_mask", "logprobs", "versions")


@dataclass(frozen=True)
class Mismatch:
    trajectory_id: str
    session_id: str
    kind: str  # differs | not_stored | unexpected
    detail: str
    where: str = ""  # topic[partition]@offset of the stored record


@dataclass
class CheckReport:
    sessions_checked: int = 0
    trajectories_verified: int = 0
    skipped: dict[str, int] = field(default_factory=dict)  # reason -> sessions
    mismatches: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def skip(self, reason: str) -> None:
        self.skipped[reason] = self.skipped.get(reason, 0) + 1


def _bits(value: object) -> object:
    if isinstance(value, float):
        return struct.pack("<d", value)
    if isinstance(value, list):
        return [_bits(v) for v in value]
    return value


def differences(rebuilt: Trajectory, stored: Trajectory) -> list[str]:
    """Human-readable differences, bit-exact for floats; empty when the records are identical."""
    out = []
    for f in dataclasses.fields(Trajectory):
        mine, theirs = getattr(rebuilt, f.name), getattr(stored, f.name)
        if _bits(mine) == _bits(theirs):
            continue
        if f.name in LIST_FIELDS:
            at = next(
                (i for i, (a, b) in enumerate(zip(mine, theirs, strict=False)) if _bits(a) != _bits(b)),
                min(len(mine), len(theirs)),
            )
            got = theirs[at] if at < len(theirs) else "<end>"
            want = mine[at] if at < len(mine) else "<end>"
            out.append(f"{f.name}[{at}]: stored {got!r}, assembly gives {want!r} (lengths {len(theirs)}/{len(mine)})")
        else:
            out.append(f"{f.name}: stored {theirs!r}, assembly gives {mine!r}")
    return out


def rebuild(sessions: list[SessionEvents], options: AssemblerOptions, codec: Codec) -> list[Trajectory]:
    """Trajectories the assembler would publish for these sessions."""
    book = SessionBook(options, codec, source_topic="replay-check")
    out = []
    for session in sessions:
        for record in session.records:
            out.extend(book.on_record(record.partition, record.offset, record.key, record.value).trajectories)
    return out


def check(sessions: list[SessionEvents], stored: Iterable[Record], options: AssemblerOptions,
          codec: Codec) -> CheckReport:
    report = CheckReport()
    checkable = []
    for session in sessions:
        if session.end is None:
            report.skip("still open")
        elif not session.complete:
            report.skip("calls missing (cut by the reading window)")
        else:
            checkable.append(session)
    ids = {s.session_id for s in checkable}
    by_id: dict[str, list[Record]] = {}
    for record in stored:
        if isinstance(record.message, Trajectory) and record.message.session_id in ids:
            by_id.setdefault(record.message.event_id, []).append(record)
    report.sessions_checked = len(checkable)
    rebuilt = {t.event_id: t for t in rebuild(checkable, options, codec)}
    for trajectory_id, mine in rebuilt.items():
        copies = by_id.pop(trajectory_id, [])
        if not copies:
            report.mismatches.append(Mismatch(trajectory_id, mine.session_id, "not_stored",
                                              "assembly gives this trajectory but none is stored"))
        for copy in copies:
            problems = differences(mine, copy.message)
            where = f"{copy.topic}[{copy.partition}]@{copy.offset}"
            if problems:
                report.mismatches.append(
                    Mismatch(trajectory_id, mine.session_id, "differs", "; ".join(problems), where)
                )
            else:
                report.trajectories_verified += 1
    for trajectory_id, copies in by_id.items():
        for copy in copies:
            report.mismatches.append(Mismatch(trajectory_id, copy.message.session_id, "unexpected",
                                              "stored, but assembly of the session gives no such trajectory",
                                              f"{copy.topic}[{copy.partition}]@{copy.offset}"))
    return report

"""Open sessions of the partitions one worker owns, rebuilt from the session-events topic itself.

Why this shape: session state is never restored from a changelog (no second copy of every event to write,
and nothing to go stale; Faust's changelog recovery was once seen stale against an earlier embedded broker,
though it recovers correctly on Apache Kafka). Instead the source offset the worker commits never passes the
first event of a session that is still open; after a crash the worker re-reads from there and rebuilds
every open session exactly. What was already published before the crash is suppressed by the
*replay end* (the highest offset whose outputs were flushed, saved beside the commit): records below it
rebuild state but publish nothing. Idle sessions are closed by an EpisodeEnd("aborted") the worker writes
into the session-events topic, so a replay closes them at the same place.

Guarantee: at-least-once. Outputs published between the last saved replay end and a crash are published
again on restart, with the same ids and contents; consumers de-duplicate on `Trajectory.event_id`
(`<session_id>/<branch_id>`).
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from seamlessflow.assembler.convert import attempt_of, call_from_token_io, provenance_of, trajectory_of
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.avro import Codec
from seamlessflow.core.assembler import SessionAssembler, SessionStatus
from seamlessflow.core.assembly_invariants import check_sequence
from seamlessflow.core.episodes import EpisodeStatus, TrajectoryStatus
from seamlessflow.core.prefix_tree import InvalidCall
from seamlessflow.kafka.dead_letters import classify
from seamlessflow.kafka.records import letter_for
from seamlessflow.messages import DeadLetter, EpisodeEnd, TokenIO, Trajectory, now_ms
from seamlessflow.rewards.request import REQUEST_KEY, pending_request

SERVICE = "assembler"
IDLE_ABORT_SUFFIX = "/idle-abort"


@dataclass
class Output:
    """What one record produced: records to publish (empty while rebuilding)."""

    trajectories: list[Trajectory] = field(default_factory=list)
    dead_letters: list[DeadLetter] = field(default_factory=list)


@dataclass
class _Open:
    session: SessionAssembler
    partition: int
    first_offset: int
    last_seen: float
    abort_requested: bool = False


@dataclass
class _Held:
    offset: int
    session_id: str | None


class SessionBook:
    def __init__(self, options: AssemblerOptions, codec: Codec, source_topic: str, team: str = "", run: str = "",
                 clock: Callable[[], float] = time.monotonic):
        self.options, self.codec, self.source_topic = options, codec, source_topic
        self.team, self.run, self.clock = team, run, clock
        self.open: dict[str, _Open] = {}
        self.closed: collections.OrderedDict[str, str] = collections.OrderedDict()  # session -> end event id
        self.held: dict[int, collections.deque[_Held]] = collections.defaultdict(collections.deque)
        self.processed: dict[int, int] = {}  # partition -> next offset to process
        self.replay_end: dict[int, int] = {}  # partition -> offsets below were published before a restart
        self.stats: collections.Counter[str] = collections.Counter()

    # -- records in -------------------------------------------------------------------------

    def on_record(self, partition: int, offset: int, key: bytes | None, value: bytes | None) -> Output:
        """Apply one session-events record; returns what to publish."""
        out = Output()
        session_id = self._apply(partition, offset, key, value, out)
        self.held[partition].append(_Held(offset, session_id))
        self.processed[partition] = offset + 1
        if offset < self.replay_end.get(partition, 0):
            self.stats["rebuilt_records"] += 1
            return Output()
        self.stats["trajectories"] += len(out.trajectories)
        self.stats["dead_letters"] += len(out.dead_letters)
        return out

    def _apply(self, partition: int, offset: int, key: bytes | None, value: bytes | None, out: Output) -> str | None:
        message, reason = classify(self.codec, value, None)
        if message is None:
            reason = reason or "empty record (no value)"
            out.dead_letters.append(self._dead_letter(partition, offset, key, value, reason))
            return None
        if isinstance(message, TokenIO):
            return self._on_token_io(message, partition, offset, key, value, out)
        if isinstance(message, EpisodeEnd):
            return self._on_end(message, partition, offset, key, value, out)
        reason = f"unexpected {type(message).__name__} on {self.source_topic}"
        out.dead_letters.append(self._dead_letter(partition, offset, key, value, reason))
        return None

    def _on_token_io(self, msg: TokenIO, partition: int, offset: int, key: bytes | None, value: bytes | None,
                     out: Output) -> str | None:
        if msg.session_id in self.closed:
            out.dead_letters.append(self._dead_letter(partition, offset, key, value, "token I/O for a closed session"))
            return None
        entry = self.open.get(msg.session_id)
        if entry is None:
            assembler = SessionAssembler(self.options.assembler_config())
            entry = self.open[msg.session_id] = _Open(assembler, partition, offset, 0.0)
        entry.last_seen = self.clock()
        try:
            outcome = entry.session.add(call_from_token_io(msg), attempt_of(msg), provenance_of(msg))
        except InvalidCall as exc:
            out.dead_letters.append(self._dead_letter(partition, offset, key, value, f"invalid call: {exc}"))
            return msg.session_id
        self.stats[outcome.value] += 1
        return msg.session_id

    def _on_end(self, end: EpisodeEnd, partition: int, offset: int, key: bytes | None, value: bytes | None,
                out: Output) -> str | None:
        if end.session_id in self.closed:
            if self.closed[end.session_id] != end.event_id:
                reason = "episode end for a session already closed"
                out.dead_letters.append(self._dead_letter(partition, offset, key, value, reason))
            else:
                self.stats["duplicate_ends"] += 1
            return None
        entry = self.open.pop(end.session_id, None)
        self._remember_closed(end.session_id, end.event_id)
        if entry is None:
            self.stats["ends_without_calls"] += 1
            return None
        self._finish(entry, end, partition, offset, key, value, out)
        return None

    def _finish(self, entry: _Open, end: EpisodeEnd, partition: int, offset: int, key: bytes | None,
                value: bytes | None, out: Output) -> None:
        self.stats["sessions_closed"] += 1
        if end.status is EpisodeStatus.ABORTED and not self.options.keep_aborted:
            self.stats["aborted_dropped"] += 1
            return
        session = entry.session
        truncated = session.status is SessionStatus.TRUNCATED
        status = TrajectoryStatus.TRUNCATED if truncated else TrajectoryStatus(end.status)
        num_calls = len(session.seen_call_ids)
        info: dict[str, Any] = {"outcomes": {o.value: n for o, n in session.counts.items() if n}}
        if end.num_calls >= 0 and end.num_calls != num_calls:
            info["calls_expected"] = end.num_calls
        if session.abandoned_attempts:
            info["abandoned_attempts"] = session.abandoned_attempts
        unmatched = session.unmatched_rewards(end.call_rewards)
        if unmatched:
            info["call_rewards_unmatched"] = unmatched
        request = pending_request(end.info_json)
        if request is not None:  # scored later by a reward worker (seamlessflow/rewards)
            info[REQUEST_KEY] = request
        for seq in session.finish():
            problems = check_sequence(seq)
            if problems:
                reason = "invariant violated: " + "; ".join(problems)
                out.dead_letters.append(self._dead_letter(partition, offset, key, value, reason))
                continue
            turns = session.turns(seq, end.call_rewards)
            out.trajectories.append(trajectory_of(seq, end, status, num_calls, info, turns))

    # -- idle sessions ----------------------------------------------------------------------

    def idle_aborts(self) -> list[EpisodeEnd]:
        """EpisodeEnd("aborted") records to write into the session-events topic for idle sessions."""
        now = self.clock()
        ends = []
        for session_id, entry in self.open.items():
            if entry.abort_requested or now - entry.last_seen < self.options.idle_timeout_s:
                continue
            entry.abort_requested = True
            info = '{"reason": "idle timeout"}'
            ends.append(EpisodeEnd(session_id + IDLE_ABORT_SUFFIX, session_id, self.team, self.run, 0.0,
                                   EpisodeStatus.ABORTED, info, -1, now_ms()))
        self.stats["idle_aborts"] += len(ends)
        return ends

    # -- offsets ----------------------------------------------------------------------------

    def commit_offset(self, partition: int) -> int:
        """The offset a restart must re-read from: the first record of the oldest open session (the records
        before it, whose sessions are all closed, are forgotten here)."""
        held = self.held[partition]
        while held and (held[0].session_id is None or held[0].session_id not in self.open):
            held.popleft()
        return held[0].offset if held else self.processed.get(partition, 0)

    def forget_partition(self, partition: int) -> None:
        """The partition moved to another worker: drop its sessions (they are rebuilt there)."""
        for session_id in [s for s, e in self.open.items() if e.partition == partition]:
            del self.open[session_id]
        self.held.pop(partition, None)
        self.processed.pop(partition, None)
        self.replay_end.pop(partition, None)

    # -- helpers ----------------------------------------------------------------------------

    def _remember_closed(self, session_id: str, end_event_id: str) -> None:
        self.closed[session_id] = end_event_id
        while len(self.closed) > self.options.closed_memory:
            self.closed.popitem(last=False)

    def _dead_letter(self, partition: int, offset: int, key: bytes | None, value: bytes | None,
                     reason: str) -> DeadLetter:
        return letter_for(SERVICE, self.source_topic, partition, offset, key, value, reason, self.team, self.run)

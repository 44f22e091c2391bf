"""Which records a replay keeps: filters on team, run, session, reward, status and time.

Reward and status belong to a session's EpisodeEnd, so on the session-events topic they select whole
sessions (a session without an end has status "open"); on the trajectories topic each record has them.
Pure: works on `Record`s whatever they were read from (broker or archive).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from seamlessflow.kafka.io import Record
from seamlessflow.messages import EpisodeEnd, TokenIO, Trajectory

OPEN = "open"


@dataclass(frozen=True)
class Filter:
    sessions: frozenset[str] = frozenset()
    team: str | None = None
    run: str | None = None
    min_reward: float | None = None
    max_reward: float | None = None
    statuses: frozenset[str] = frozenset()
    since_ms: int | None = None
    until_ms: int | None = None

    @property
    def is_empty(self) -> bool:
        return self == Filter()

    def in_window(self, record: Record) -> bool:
        return ((self.since_ms is None or record.timestamp_ms >= self.since_ms)
                and (self.until_ms is None or record.timestamp_ms < self.until_ms))

    def names(self, message: TokenIO | EpisodeEnd | Trajectory) -> bool:
        """Session, team and run: fields every session-level message carries."""
        return ((not self.sessions or getattr(message, "session_id", None) in self.sessions)
                and (self.team is None or message.team == self.team)
                and (self.run is None or message.run == self.run))

    def outcome(self, reward: float | None, status: str) -> bool:
        if self.statuses and status not in self.statuses:
            return False
        if reward is None:
            return self.min_reward is None and self.max_reward is None
        return ((self.min_reward is None or reward >= self.min_reward)
                and (self.max_reward is None or reward <= self.max_reward))


@dataclass
class SessionEvents:
    """One session's records from the session-events topic, in topic order."""

    session_id: str
    records: list[Record] = field(default_factory=list)

    @property
    def calls(self) -> list[TokenIO]:
        return [r.message for r in self.records if isinstance(r.message, TokenIO)]

    @property
    def end(self) -> EpisodeEnd | None:
        ends = [r.message for r in self.records if isinstance(r.message, EpisodeEnd)]
        return ends[0] if ends else None

    @property
    def status(self) -> str:
        return self.end.status if self.end else OPEN

    @property
    def complete(self) -> bool:
        """The end says how many calls the proxy published; fewer seen means the window cut the session."""
        end = self.end
        return end is not None and (end.num_calls < 0 or len({c.event_id for c in self.calls}) >= end.num_calls)


def group_sessions(records: Iterable[Record]) -> list[SessionEvents]:
    """Decoded session-events records grouped by session, sessions in order of first appearance."""
    sessions: dict[str, SessionEvents] = {}
    for record in records:
        session_id = getattr(record.message, "session_id", None)
        if session_id is not None:
            sessions.setdefault(session_id, SessionEvents(session_id)).records.append(record)
    return list(sessions.values())


def select_sessions(records: Iterable[Record], where: Filter) -> list[SessionEvents]:
    kept = []
    for session in group_sessions(r for r in records if where.in_window(r)):
        first = session.records[0].message
        end = session.end
        if where.names(first) and where.outcome(end.reward if end else None, session.status):
            kept.append(session)
    return kept


def select_trajectories(records: Iterable[Record], where: Filter) -> list[Record]:
    return [
        r for r in records
        if isinstance(r.message, Trajectory) and where.in_window(r) and where.names(r.message)
        and where.outcome(r.message.reward, r.message.status)
    ]

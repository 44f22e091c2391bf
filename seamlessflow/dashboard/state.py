"""What the dashboard shows, built from the records it reads (no database of its own): the latest heartbeat
per resource, the status history for the role timeline, the scalar points for the curves (reward, eval, the
train-inference mismatch, ...: `tracking.points`), and the most recent sessions for the sessions browser.

Records are fed in by one thread (`seamlessflow.dashboard.follow`) and read as JSON by the web handlers;
a lock keeps the two apart. Memory is bounded: the newest `max_sessions` sessions and `max_statuses`
status records are kept (each slimmed to what the timeline reads), and each curve at most `max_points`
points, evenly spread (`dashboard.curve`).
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence

from seamlessflow.core.accounting import ACCOUNTS, account
from seamlessflow.dashboard.curve import Curve
from seamlessflow.kafka.io import Record
from seamlessflow.messages import CommandAck, EpisodeEnd, ResourceStatus, TokenIO
from seamlessflow.replay.select import SessionEvents
from seamlessflow.replay.turns import session_json
from seamlessflow.scheduler.role_intervals import device_timeline, role_switches, timeline_sample
from seamlessflow.stack.rows import resource_row
from seamlessflow.tracking.follow import Incoming
from seamlessflow.tracking.points import EvalFigures, Point, PointMaker

Decode = Callable[[Sequence[int]], str]


class DashboardState:
    def __init__(self, team: str, run: str, max_sessions: int = 300, max_statuses: int = 50_000,
                 decode: Decode | None = None, max_points: int = 4096, maker: PointMaker | None = None,
                 mismatch_warn: float | None = None):
        """`maker`: the run's (`PointMaker.for_settings`: in an adapters stack each team's trainer has curves of
        its own). `mismatch_warn`: the trainer's warning threshold on the train-inference mismatch
        (`trainer.mismatch_warn`), drawn on the mismatch curve; None: not known here, no line."""
        self.team, self.run = team, run
        self.mismatch_warn = mismatch_warn
        self.decode = decode
        self.latest: dict[str, ResourceStatus] = {}
        self.history: deque[ResourceStatus | CommandAck] = deque(maxlen=max_statuses)
        self.maker = maker or PointMaker(team, run)
        self.curves: dict[str, Curve] = {}
        self.max_points = max_points
        self.evals: dict[int, dict[str, float]] = {}  # the base's
        self.team_evals: dict[str, dict[int, dict[str, float]]] = {}  # each team's adapter's (an adapters stack)
        self.sessions: OrderedDict[str, SessionEvents] = OrderedDict()
        self.max_sessions = max_sessions
        self.records = 0
        self._lock = threading.Lock()

    # -- feeding ------------------------------------------------------------------------------------------

    def feed(self, incoming: Incoming) -> None:
        message = incoming.message
        team, run = getattr(message, "team", None), getattr(message, "run", None)
        # an eval's team says whose policy it evaluated (a team's adapter): the maker sorts it
        theirs = (team, run) != (None, None) and (team, run) != (self.team, self.run)
        if theirs and not isinstance(message, EvalFigures):
            return
        with self._lock:
            self.records += 1
            if isinstance(message, ResourceStatus):
                self.latest[message.resource_id] = message
                self.history.append(timeline_sample(message))
            elif isinstance(message, CommandAck):
                self.history.append(message)
            elif isinstance(message, (TokenIO, EpisodeEnd)):
                self._session(message, incoming.timestamp_ms)
            elif isinstance(message, EvalFigures) and message.team in self.maker.teams:
                self.team_evals.setdefault(message.team, {})[message.version] = dict(message.figures)
            elif isinstance(message, EvalFigures):
                self.evals[message.version] = dict(message.figures)
            self._plot(self.maker.feed(message))

    def release_overdue(self, now_s: float) -> None:
        """Evals that waited too long for their version's step, plotted at the version (once per poll)."""
        with self._lock:
            self._plot(self.maker.overdue(now_s))

    def _plot(self, points: list[Point]) -> None:
        for point in points:
            if point.tag not in self.curves:
                self.curves[point.tag] = Curve(self.max_points)
            self.curves[point.tag].add(point.step, point.value)

    def _session(self, message: TokenIO | EpisodeEnd, timestamp_ms: int) -> None:
        session = self.sessions.get(message.session_id)
        if session is None:
            session = self.sessions[message.session_id] = SessionEvents(message.session_id)
            while len(self.sessions) > self.max_sessions:
                self.sessions.popitem(last=False)
        session.records.append(Record("session-events", 0, len(session.records), None, None, timestamp_ms, message))

    # -- reading (JSON for the web handlers) ------------------------------------------------------------

    def overview(self) -> dict:
        with self._lock:
            now = time.time()
            resources = [resource_row(s, now) for _, s in sorted(self.latest.items())]
            for row in resources:  # which trainer trains which team's adapter (from the settings)
                if row["id"] in self.maker.trainers:
                    row["adapter_team"] = self.maker.trainers[row["id"]]
            return {"team": self.team, "run": self.run, "records": self.records, "resources": resources,
                    "step": self.maker.step, "steps": self.maker.team_steps(),
                    "evals": {str(v): f for v, f in sorted(self.evals.items())},
                    "team_evals": {team: {str(v): f for v, f in sorted(evals.items())}
                                   for team, evals in sorted(self.team_evals.items())}}

    def curves_json(self) -> dict:
        """`steps`: each team's adapter trainer's newest step ({} in a stack that trains the base);
        `mismatch_warn`: the threshold line of the mismatch curve (`train/mismatch_abs_mean`), or None."""
        with self._lock:
            return {"step": self.maker.step, "steps": self.maker.team_steps(), "mismatch_warn": self.mismatch_warn,
                    "curves": {tag: curve.points() for tag, curve in sorted(self.curves.items())}}

    def timeline_json(self) -> dict:
        with self._lock:
            history = list(self.history)
        intervals = device_timeline(history)  # each device once (core.accounting)
        books = account(intervals) if intervals else None
        return {
            "intervals": [
                {"resource": i.resource_id, "start": round(i.start, 3), "end": round(i.end, 3), "kind": i.kind}
                for i in intervals
            ],
            "bubble_ratio": round(books.bubble, 4) if books else None,
            "seconds_by_kind": {k: round(v, 2) for k, v in books.seconds.items()} if books else {},
            "accounts": ACCOUNTS,  # kind -> the account's name, in the order shown
            "switches": [
                {"t": round(t, 3), "resource": r, "from": a, "to": b} for t, r, a, b in role_switches(history)
            ],
        }

    def sessions_json(self, limit: int = 100) -> list[dict]:
        with self._lock:
            sessions = list(self.sessions.values())[-limit:]
        out = []
        for s in reversed(sessions):
            calls, end = s.calls, s.end
            versions = sorted({v for c in calls for v in c.versions})
            out.append({"session_id": s.session_id, "status": s.status, "reward": end.reward if end else None,
                        "calls": len(calls), "generated": sum(len(c.completion_ids) for c in calls),
                        "versions": versions, "task_id": end.task_id if end else None,
                        "started_ms": s.records[0].timestamp_ms})
        return out

    def session_detail(self, session_id: str) -> dict | None:
        with self._lock:
            session = self.sessions.get(session_id)
            if session is None:
                return None
            session = SessionEvents(session.session_id, list(session.records))
        detail = session_json(session)
        detail["forks"] = sum(1 for t in detail["turns"] if t["outcome"] == "fork")
        if self.decode is not None:
            for turn in detail["turns"]:
                turn["fed_text"] = self.decode(turn["fed"])
                turn["generated_text"] = [self.decode([t]) for t in turn["generated"]]
        return detail

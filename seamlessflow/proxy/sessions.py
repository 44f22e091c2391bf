"""Per-session state the proxy keeps: owner team, events published, calls in flight, routing profile.
Bounded (LRU), and small: the table holds `proxy.max_sessions` (100 000) of them, ended ones included, so each
byte counts 100 000 times. The event an end waits on is made only when an end finds calls in flight (an
`asyncio.Event` is ~860 bytes, 60% of a state when every state had one), and the state has slots.

When a session is evicted its owner is forgotten (another team could then claim the id) and its call count
becomes unknown: the episode-end event then says `num_calls = -1`, which the assembler treats as
"count unknown". Sessions with calls in flight are never evicted.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from seamlessflow.core.routing import Profile, ProfileLearner
from seamlessflow.proxy.capture import CallCapture


class SessionOwnedByOtherTeam(Exception):
    pass


@dataclass(slots=True)
class SessionState:
    team: str
    events_published: int = 0
    inflight: int = 0
    known_from_start: bool = True  # False when first seen at /end (calls may have gone through another proxy)
    declared: Profile | None = None  # from the X-Session-Profile header; wins over the learnt one
    learner: ProfileLearner | None = None  # None: profiles are not learnt
    versions: set[int] = field(default_factory=set)  # policy versions of the tokens generated (the end reports them)
    call_rewards: dict[str, float] = field(default_factory=dict)  # wire key -> reward, published with the end
    _idle: asyncio.Event | None = field(default=None, repr=False)  # made by the first end that must wait

    @property
    def profile(self) -> Profile | None:
        """What routing uses: the declared profile, else the learnt one, else None (any engine)."""
        return self.declared or (self.learner.profile if self.learner else None)

    def observe(self, prompt_tokens: int, completion_tokens: int) -> None:
        if self.learner is not None:
            self.learner.observe(prompt_tokens, completion_tokens)

    def recorded(self, events: int, capture: CallCapture) -> None:
        """A call of this session was recorded: count its events, learn its shape, note its policy versions."""
        self.events_published += events
        self.observe(capture.prompt_tokens, capture.completion_tokens)
        self.versions.update(v for choice in capture.choices for v in choice.versions)

    def call_started(self) -> None:
        self.inflight += 1
        if self._idle is not None:
            self._idle.clear()

    def call_finished(self) -> None:
        self.inflight -= 1
        if self.inflight <= 0:
            self.inflight = 0
            if self._idle is not None:
                self._idle.set()

    async def idle(self) -> None:
        """Returns once no call of the session is in flight (at once when none is)."""
        if self.inflight <= 0:
            return
        if self._idle is None:
            self._idle = asyncio.Event()
        await self._idle.wait()


class SessionTable:
    def __init__(self, max_sessions: int, learner: Callable[[], ProfileLearner] | None = None):
        self.max_sessions = max_sessions
        self.learner = learner
        self._sessions: OrderedDict[str, SessionState] = OrderedDict()

    def __len__(self) -> int:
        return len(self._sessions)

    def get(self, session_id: str) -> SessionState | None:
        return self._sessions.get(session_id)

    def claim(self, session_id: str, team: str, known_from_start: bool = True) -> SessionState:
        """The session's state, created for `team` if new; raises if another team opened it."""
        state = self._sessions.get(session_id)
        if state is None:
            learner = self.learner() if self.learner else None
            state = self._sessions[session_id] = SessionState(team, known_from_start=known_from_start, learner=learner)
            self._evict()
        elif state.team != team:
            raise SessionOwnedByOtherTeam(session_id)
        else:
            self._sessions.move_to_end(session_id)
        return state

    def _evict(self) -> None:
        skipped = 0
        while len(self._sessions) > self.max_sessions and skipped < len(self._sessions):
            session_id, state = next(iter(self._sessions.items()))
            if state.inflight:
                self._sessions.move_to_end(session_id)
                skipped += 1
            else:
                del self._sessions[session_id]

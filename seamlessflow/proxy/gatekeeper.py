"""The gate a call passes between its door and the state it continues: who may call, as which session, and when.

In order, for every call whichever door it came through: the team of its API key (401), the session id it
named (400), then, once its door parsed the body: the team-model check (`team_models.py`, 403), the sampling
rule (`sampling.py`, 400), the session it belongs to (a continuation's is its stored response's or
conversation's, `state.py`), the claim of that session for the team (403), its declared routing profile (400),
the call's id, and last the team's quota (`quotas.py`) and a generation slot (`admission.py`), both 429.
Then the call goes down to the state; on its way back the gate charges the team the tokens it generated and
counts a recorded call in its session.

A session's other requests pass here too: its end waits for its calls in flight, and per-call rewards are
kept with its state until then.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import uuid

from seamlessflow.core.routing import parse_profile
from seamlessflow.proxy.admission import Admission
from seamlessflow.proxy.call_rewards import call_id_of_key
from seamlessflow.proxy.calls import Call, CallIdentity
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.quotas import Quotas
from seamlessflow.proxy.sampling import SamplingGate
from seamlessflow.proxy.sessions import SessionOwnedByOtherTeam, SessionState, SessionTable
from seamlessflow.proxy.state import Continued, ResponseState
from seamlessflow.proxy.team_models import check_model
from seamlessflow.teams import TeamKeys

SESSION_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
PROFILE_HEADER = "X-Session-Profile"  # named in its 400


class Gatekeeper:
    def __init__(self, options: ProxyOptions, team_keys: TeamKeys, sessions: SessionTable, sampling: SamplingGate,
                 quotas: Quotas, admission: Admission, state: ResponseState):
        self.options, self.team_keys, self.sessions, self.sampling = options, team_keys, sessions, sampling
        self.quotas, self.admission, self.state = quotas, admission, state

    # -- before the body is read ---------------------------------------------------------------------
    def team(self, key: str | None, key_header: str) -> str:
        """The team whose key it is; 401 for none (`key_header` says how to send one) or an unknown one."""
        if not key:
            raise ProxyError(401, f"missing API key: send '{key_header}'")
        team = self.team_keys.team_for(key)
        if team is None:
            raise ProxyError(401, "unknown API key")
        return team

    def session_named(self, session_id: str | None) -> str | None:
        """The session id a client named (path or header), checked (400); None when it named none."""
        if session_id is not None and not SESSION_ID.match(session_id):
            raise ProxyError(400, "session id must be 1-128 characters from [A-Za-z0-9._:-]", "session_id")
        return session_id

    # -- a call ----------------------------------------------------------------------------------------
    async def serve(self, call: Call) -> None:
        """The call's checks, its session claimed, then the layers below while it holds its team's quota and a
        generation slot."""
        request, team = call.request, call.team
        check_model(self.options, team, request.model)  # another team's adapter: refused, nothing claimed
        self.sampling.admit(request, team)
        continued = await self.state.continue_call(call)
        session_id = self.session_of(call.session_id, continued)
        session = self.claim(session_id, team)
        if call.declared_profile is not None:
            try:
                session.declared = parse_profile(call.declared_profile)
            except ValueError as exc:
                raise ProxyError(400, str(exc), PROFILE_HEADER) from None
        call.who = CallIdentity(session_id, team, self.call_id(call, session_id), call.attempt)
        call.profile = session.profile
        session.call_started()
        try:
            async with self.quotas.hold(team, session_id), self.admission.slot():
                try:
                    await self.state.serve(call)
                finally:  # the tokens generated, also by a call that failed or whose agent left
                    if call.capture is not None:
                        self.quotas.charge(team, call.capture.completion_tokens)
                        if call.recorded:
                            session.recorded(len(call.capture.choices), call.capture)
        finally:
            session.call_finished()

    def session_of(self, session_id: str | None, continued: Continued | None) -> str:
        """The session a call belongs to: its stored response's or conversation's where it continues one (a
        client that named another gets a 400), else the one the client named, else a new one."""
        if continued is None or continued.session_id is None:
            return session_id or uuid.uuid4().hex
        if session_id is not None and session_id != continued.session_id:
            raise ProxyError(400, f"{continued.named} belongs to another session than '{session_id}'",
                             continued.param)
        return continued.session_id

    def claim(self, session_id: str, team: str, known_from_start: bool = True) -> SessionState:
        """The session's state, made for `team` if new; 403 when another team's."""
        try:
            return self.sessions.claim(session_id, team, known_from_start=known_from_start)
        except SessionOwnedByOtherTeam:
            raise ProxyError(403, "this session id belongs to another team", "session_id") from None

    @staticmethod
    def call_id(call: Call, session_id: str) -> str:
        """The request's key within its session: the name the client gave it, else a digest of its route and body.
        A client SDK's retry sends the same body again, so its attempts share the call id without any state
        here (a retry may reach another proxy worker); the assembler trains the last attempt (`Call.attempt`)."""
        if call.call_key:
            return call_id_of_key(call.team, session_id, call.call_key)
        digest = hashlib.blake2b(f"{call.team}/{session_id}/{call.path}/".encode(), digest_size=12)
        digest.update(call.raw)
        return digest.hexdigest()

    # -- a session's end and rewards -------------------------------------------------------------------
    async def ending(self, session_id: str, team: str) -> SessionState:
        """The session's state once no call of it is in flight (409 past `end_wait_s`): its end must follow its last
        TokenIO on the topic."""
        session = self.claim(session_id, team, known_from_start=False)
        if session.inflight > 0:
            try:
                async with asyncio.timeout(self.options.end_wait_s):
                    await session.idle()
            except TimeoutError:
                raise ProxyError(409, "the session still has calls in flight; end it after they finish") from None
        return session

    def calls_recorded(self, session: SessionState) -> int:
        """How many events of the session this worker recorded; -1 where that is not all of them (it was first
        seen at its end, or other workers may have served some of its calls)."""
        return session.events_published if session.known_from_start and self.options.workers == 1 else -1

    def reward_call(self, session_id: str, team: str, key: str, reward: float) -> None:
        """A reward for one call (`key` as on the wire), published with the session's end."""
        if self.options.workers > 1:  # the end may reach another worker, which would not know this reward
            raise ProxyError(409, "this proxy runs several workers: send per-call rewards in the session end's "
                                  "call_rewards instead", "call")
        self.claim(session_id, team, known_from_start=False).call_rewards[key] = reward

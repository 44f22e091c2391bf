"""One agent call on its way down the proxy's layers, and what each layer settles about it.

A call passes each layer once, top to bottom, as a request passes an HTTP filter chain:

    doors        doors.py and the *_door.py modules: the API's request parsed, its reply rendered
    gatekeeper   gatekeeper.py: team, session id, claim, the team-model check, the sampling rule, quotas, slots
    state        state.py: the stored response or conversation it continues, and the response it leaves
    generation   generation.py: routing, pause and continue, the engine client
    recording    recording.py: one TokenIO per choice, acknowledged by Kafka

A layer imports only the layers below it. A `Call` is made by its door and handed down (as one sample
dataclass carries a rollout through every stage); each layer below writes only its own fields of it. What
the agent is shown is its door's alone (`Reply`): generation hands the door the call's shaper, and the
state asks it for the reply a stored response keeps, never which door that is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from seamlessflow.core.routing import Profile
from seamlessflow.messages import StoredResponse
from seamlessflow.proxy.capture import CallCapture
from seamlessflow.proxy.requests import CallRequest
from seamlessflow.proxy.shaping import Shaper

Emit = Callable[[list[dict]], Awaitable[None]]  # a streamed call's chat-shaped chunks of one network read


@dataclass(frozen=True)
class CallIdentity:
    """Whose call it is: the session it belongs to, the team that owns the session, and the call's own id."""

    session_id: str
    team: str
    call_id: str  # the request's key in its session: a client's retries of one request share it
    attempt: int = 0  # the client's count of its retries of this request


class Reply(Protocol):
    """The door's side of a call, as the layers below reach it."""

    reply_id: str  # the reply's own ids (response, items, tool calls) are made from it

    def open(self, shaper: Shaper, session_id: str) -> Emit | None:
        """Generation starts the call (the session settled): where its chunks go, or None when not streamed."""
        ...

    def finish(self) -> dict | None:
        """The call is recorded: the reply as the API shows it (what a stored response keeps; None for a stream
        whose API keeps none)."""
        ...


class Recent:
    """A Responses WebSocket's last response, kept in memory for its connection's next `previous_response_id`
    whether it was stored or not (the API's WebSocket mode continues `store: false` responses so)."""

    def __init__(self) -> None:
        self.last: StoredResponse | None = None

    def get(self, response_id: str) -> StoredResponse | None:
        return self.last if self.last is not None and self.last.response_id == response_id else None

    def remember(self, record: StoredResponse) -> None:
        self.last = record


@dataclass(eq=False)
class Call:
    """One call: what its door read (the first fields), then what the layers below settle."""

    request: CallRequest  # the body, parsed by the door into chat or completions form
    reply: Reply
    team: str  # the team of the API key (checked by the gatekeeper before the body was read)
    session_id: str | None  # the session the client named (path or header), None when it named none
    raw: bytes  # the body (or WebSocket frame) as sent: a call with no key is named by its digest
    path: str
    call_key: str | None = None  # the client's name for the request (Idempotency-Key, X-Request-Id)
    attempt: int = 0  # the client SDK's count of its retries of this request
    declared_profile: str | None = None  # X-Session-Profile, as sent
    recent: Recent | None = None  # on a Responses WebSocket: its connection's last response
    # the gatekeeper's
    who: CallIdentity | None = None
    profile: Profile | None = None  # the session's routing profile when the call started
    # the state's: the stored response a Responses call continues (its items are listed again with its own)
    previous: StoredResponse | None = None
    # generation's and recording's: the tokens (also of a call that failed), and whether Kafka has them
    capture: CallCapture | None = None
    recorded: bool = False

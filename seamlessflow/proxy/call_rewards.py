"""Rewards an agent gives single calls of its session: how a call is named, and the bodies that carry them.

Why: a 40-turn tool-use episode rewarded only at its end gives every turn the same credit. An agent names a
call either by its position in the session (0, 1, ...: the order in which the proxy recorded the session's
calls, a retry keeping its call's position) or by the call key it sent with the call (`Idempotency-Key` or
`X-Request-Id`, the key the proxy already names the call's record by). On the wire (`EpisodeEnd.call_rewards`)
a position is `#<n>` and a key is the call id the proxy derived from it, so the assembler matches either.
"""

from __future__ import annotations

import hashlib
import math
import re

from pydantic import BaseModel, ConfigDict, field_validator

POSITION = re.compile(r"^[0-9]{1,6}$")
MAX_CALL_KEY = 128
NAMING = ("a call is named by its position in the session (0, 1, ... below 1000000) or by the call key it was "
          f"sent with (Idempotency-Key or X-Request-Id, 1-{MAX_CALL_KEY} characters)")


def call_id_of_key(team: str, session_id: str, key: str) -> str:
    """The call id of a call the client named by ``key``: the same for its retries, without state here."""
    return hashlib.blake2b(f"{team}/{session_id}/{key}".encode(), digest_size=12).hexdigest()


def wire_key(team: str, session_id: str, call: str) -> str:
    """How ``call`` is named on the wire: ``#<n>`` for a position, else the call id of its key."""
    if not call or len(call) > MAX_CALL_KEY:
        raise ValueError(f"invalid call {call[:40]!r}: {NAMING}")
    if call.isascii() and call.isdigit():
        if not POSITION.match(call):
            raise ValueError(f"invalid call position {call[:40]!r}: {NAMING}")
        return f"#{int(call)}"
    return call_id_of_key(team, session_id, call)


def _finite(value: float) -> float:
    if not math.isfinite(value):
        raise ValueError("reward must be a finite number")
    return value


class CallRewardRequest(BaseModel):
    """The body of `POST /sessions/<id>/calls/<call>/reward`."""

    model_config = ConfigDict(extra="forbid", strict=True)  # "1" is not a reward

    reward: float

    @field_validator("reward")
    @classmethod
    def _finite_reward(cls, value: float) -> float:
        return _finite(value)


def finite_rewards(rewards: dict[str, float]) -> dict[str, float]:
    """The per-call rewards of a session end, checked: each finite."""
    for value in rewards.values():
        _finite(value)
    return rewards


def on_the_wire(team: str, session_id: str, rewards: dict[str, float]) -> dict[str, float]:
    """Per-call rewards keyed as the assembler reads them; ValueError naming the first call it cannot read."""
    return {wire_key(team, session_id, call): reward for call, reward in rewards.items()}

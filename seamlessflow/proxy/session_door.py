"""The door to a session itself: `POST /sessions/{id}/end` (the episode's reward and status) and `POST
/sessions/{id}/calls/{call}/reward` (a reward for one call, published with the end). Parse and render only: the
session passes the gatekeeper (its team, its calls in flight), and its end is recorded after its calls.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, TypeVar

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.proxy.call_rewards import CallRewardRequest, finite_rewards, on_the_wire, wire_key
from seamlessflow.proxy.doors import BEARER_HEADER, SESSION_HEADER, bearer_key, read_body, read_json
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.gatekeeper import Gatekeeper
from seamlessflow.proxy.recording import Recorder

BodyT = TypeVar("BodyT", bound=BaseModel)


class EndRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # "1" is not a reward: no coercion from strings

    reward: float
    status: Annotated[EpisodeStatus, Field(strict=False)] = EpisodeStatus.DONE  # from JSON: its value
    info: dict[str, Any] = Field(default_factory=dict)
    group_id: str | None = None
    task_id: str | None = None
    call_rewards: dict[str, float] = Field(default_factory=dict)  # call (position or key) -> reward

    @field_validator("reward")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("reward must be a finite number")
        return value

    @field_validator("call_rewards")
    @classmethod
    def _finite_calls(cls, value: dict[str, float]) -> dict[str, float]:
        return finite_rewards(value)


class SessionDoor:
    def __init__(self, gatekeeper: Gatekeeper, recorder: Recorder, max_body_bytes: int):
        self.gatekeeper, self.recorder, self.max_body_bytes = gatekeeper, recorder, max_body_bytes

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/sessions/{session_id}/end", self.end)
        app.router.add_post("/sessions/{session_id}/calls/{call}/reward", self.call_reward)

    async def end(self, request: web.Request) -> web.Response:
        team, session_id, end = await self._read(request, EndRequest, "episode end")
        session = await self.gatekeeper.ending(session_id, team)  # the end must follow the session's last TokenIO
        try:
            call_rewards = {**session.call_rewards, **on_the_wire(team, session_id, end.call_rewards)}
        except ValueError as exc:
            raise ProxyError(400, f"invalid episode end: call_rewards: {exc}", "call_rewards") from None
        num_calls = self.gatekeeper.calls_recorded(session)
        await self.recorder.end(session_id, team, end.reward, end.status, end.info, num_calls, end.group_id,
                                end.task_id, call_rewards)
        body = {
            "session_id": session_id,
            "num_calls": num_calls,
            "recorded": True,
            "versions": sorted(session.versions),
        }  # which policy versions generated it (an eval pins on these)
        return web.json_response(body, headers={SESSION_HEADER: session_id})

    async def call_reward(self, request: web.Request) -> web.Response:
        """A reward for one call, kept with the session until its end publishes it (`EpisodeEnd.call_rewards`)."""
        team, session_id, body = await self._read(request, CallRewardRequest, "call reward")
        try:
            key = wire_key(team, session_id, request.match_info["call"])
        except ValueError as exc:
            raise ProxyError(400, str(exc), "call") from None
        self.gatekeeper.reward_call(session_id, team, key, body.reward)
        return web.json_response({"session_id": session_id, "call": key, "reward": body.reward, "recorded": False},
                                 headers={SESSION_HEADER: session_id})

    async def _read(self, request: web.Request, model: type[BodyT], what: str) -> tuple[str, str, BodyT]:
        """The team, the session id and the validated body of a request about one session."""
        team = self.gatekeeper.team(bearer_key(request), BEARER_HEADER)
        session_id = self.gatekeeper.session_named(request.match_info["session_id"])
        assert session_id is not None  # in the route's path
        value = read_json(await read_body(request, self.max_body_bytes))
        try:
            body = model.model_validate(value)
        except ValidationError as exc:
            raise ProxyError(400, f"invalid {what}: {exc.errors(include_url=False, include_input=False)}") from None
        return team, session_id, body

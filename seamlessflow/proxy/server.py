"""The proxy's HTTP service: OpenAI routes, session identity, team auth, backpressure, event publishing.

A call's life: authenticate (team from the bearer key) -> session id (path, header, or generated) ->
validate the body -> admit (bounded slots and queue, else 429) -> `CallRun` streams from the engine ->
one `TokenIO` per choice is published and *acknowledged by Kafka* -> the response completes. If the
events cannot be confirmed the agent gets a retryable 503 (non-streaming) or an SSE error instead of
`[DONE]` (streaming): a response whose tokens were not recorded never looks like a success.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import json
import logging
import math
import re
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

import aiohttp
import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.core.routing import parse_profile
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.messages import EpisodeEnd, now_ms
from seamlessflow.model.sampling import SamplingOptions
from seamlessflow.ports import reachable_host
from seamlessflow.proxy.admission import Admission
from seamlessflow.proxy.call_rewards import CallRewardRequest, call_id_of_key, finite_rewards, on_the_wire, wire_key
from seamlessflow.proxy.compaction import CompactDoor
from seamlessflow.proxy.deltas import PromptBases
from seamlessflow.proxy.doors import DOOR, ClientStream, FrontDoor, OpenAIDoor, json_reply
from seamlessflow.proxy.engine_fence import EngineFence
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.generation import CallRun, ClientGone, PauseGate, UpstreamRejected
from seamlessflow.proxy.messages_api import MessagesDoor
from seamlessflow.proxy.metrics import ProxyMetrics
from seamlessflow.proxy.openapi import openapi_document
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.publisher import EventPublisher
from seamlessflow.proxy.quotas import QuotaExceeded, Quotas
from seamlessflow.proxy.recording import CallIdentity, CallResult, Recorder
from seamlessflow.proxy.requests import CallRequest
from seamlessflow.proxy.response_store import ResponseStore
from seamlessflow.proxy.responses_api import ResponsesDoor
from seamlessflow.proxy.responses_socket import ResponsesSockets, SocketCall
from seamlessflow.proxy.routing import EngineTable
from seamlessflow.proxy.sampling import SamplingGate
from seamlessflow.proxy.sessions import SessionOwnedByOtherTeam, SessionState, SessionTable
from seamlessflow.proxy.stored_responses import StoredResponses
from seamlessflow.proxy.team_models import check_model
from seamlessflow.teams import TeamKeys
from seamlessflow.topics import Topics

log = logging.getLogger(__name__)
BodyT = TypeVar("BodyT", bound=BaseModel)

SESSION_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
SESSION_HEADER = "X-Session-Id"
PROFILE_HEADER = "X-Session-Profile"  # prefill | decode | auto: declares the session's routing profile
CALL_KEY_HEADERS = ("Idempotency-Key", "X-Request-Id")
RETRY_COUNT_HEADER = "X-Stainless-Retry-Count"
CHAT_DOOR = OpenAIDoor("chat")
MESSAGES_DOOR = MessagesDoor()
RESPONSES_DOOR = ResponsesDoor()
DOORS: dict[str, FrontDoor] = {
    "/v1/chat/completions": CHAT_DOOR,
    "/v1/completions": OpenAIDoor("completions"),
    "/v1/responses": RESPONSES_DOOR,
    "/v1/responses/compact": CompactDoor(),  # a summary by the policy, recorded; what follows it forks
    "/v1/messages": MESSAGES_DOOR,
}


def attempt_of(request: web.Request) -> int:
    """Which attempt of its request this is, as the client's SDK counts it (0 when it does not say)."""
    value = request.headers.get(RETRY_COUNT_HEADER, "")
    return int(value) if value.isdigit() and len(value) < 6 else 0


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


class ProxyServer:
    def __init__(
        self,
        settings: Settings,
        config: ProxyOptions | None = None,
        codec: Codec | None = None,
        team_keys: TeamKeys | None = None,
        publisher: EventPublisher | None = None,
    ):
        self.settings = settings
        self.config = config or ProxyOptions.from_settings(settings)
        self.codec = codec or codec_for(settings)
        self.team_keys = team_keys or TeamKeys.from_settings(settings)
        self.topic = Topics(settings).session_events
        self.metrics = ProxyMetrics()
        self.engines = EngineTable(self.config.health_failures, self.config.routing.fit_table())
        for engine in self.config.engines:
            self.engines.add(
                engine.id, engine.url, engine.weight_version, hardware_tags=frozenset(engine.hardware_tags)
            )
        self.gate = PauseGate()
        self.sessions = SessionTable(
            self.config.max_sessions, self.config.routing.learner if self.config.routing.learn else None
        )
        self.bases = PromptBases(self.config.prompt_delta_bases, self.config.prompt_delta_memory_mb << 20)
        self.publisher = publisher or EventPublisher(settings, self.codec, **self.config.producer)
        c = self.config
        self.recorder = Recorder(
            self.publisher,
            self.topic,
            settings.run,
            self.sessions,
            self.bases,
            self.metrics,
            c.delivery_timeout_s,
            c.retry_after_s,
            c.prompt_deltas,
        )
        store = ResponseStore(settings, self.codec, self.publisher, Topics(settings).responses,
                              c.stored_cache_mb << 20, c.stored_wait_s, c.delivery_timeout_s)
        self.stored = StoredResponses(store, c, settings.run, settings.max_record_bytes, self._team)
        self.admission = Admission(c.max_inflight, c.max_queued, c.pause_timeout_s, c.retry_after_s)
        self.quotas = Quotas(c.teams, self.metrics, c.retry_after_s)  # each team's share, before a slot
        self.sampling = SamplingGate(SamplingOptions.of(settings).rule(), self.metrics)
        self.http: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None
        self.fence = EngineFence(self.engines, self.gate)
        self._fence_runner: web.AppRunner | None = None
        self.fence_port: int | None = None
        self.sockets = ResponsesSockets(self)

    # -- app --------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.max_body_bytes, middlewares=[self._errors])
        for prefix in ("", "/sessions/{session_id}"):
            for path, door in DOORS.items():
                app.router.add_post(prefix + path, functools.partial(self._call, door=door))
            app.router.add_get(prefix + "/v1/models", self._models)
            app.router.add_get(prefix + "/v1/responses", self.sockets.open)  # the Responses API's WebSocket mode
            self.stored.add_routes(app, prefix)
        app.router.add_post("/sessions/{session_id}/end", self._end)
        app.router.add_post("/sessions/{session_id}/calls/{call}/reward", self._call_reward)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/openapi.json", self._openapi)
        return app

    async def start_http(self) -> None:
        connector = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300)
        self.http = aiohttp.ClientSession(connector=connector, auto_decompress=False)
        self._runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True)
        await self._runner.setup()
        # several workers listen on one port; the kernel spreads connections over them (`stack.proxy_services`)
        site = web.TCPSite(
            self._runner, self.config.host, self.config.port, backlog=2048, reuse_port=self.config.workers > 1 or None
        )
        await site.start()
        self.port = self._runner.addresses[0][1]  # the bound port (config.port may be 0)
        await self._start_fence_site()

    async def _start_fence_site(self) -> None:
        """The engine fence on a port of this worker's own, never on the agents' port: an agent must not be able to
        hold an engine, and a shared port (several workers) would hand a hold to one worker only."""
        fence_app = web.Application(middlewares=[self._errors])
        self.fence.add_routes(fence_app)
        self._fence_runner = web.AppRunner(fence_app, access_log=None)
        await self._fence_runner.setup()
        await web.TCPSite(self._fence_runner, self.config.host, 0).start()
        self.fence_port = self._fence_runner.addresses[0][1]

    async def stop_http(self) -> None:
        if self._fence_runner is not None:
            await self._fence_runner.cleanup()
        if self._runner is not None:
            await self._runner.cleanup()
        if self.http is not None:
            await self.http.close()

    @property
    def fence_url(self) -> str:
        """Where a weight update holds and releases this process's engines (`engine_fence.py`)."""
        return f"http://{reachable_host(self.config.host)}:{self.fence_port}"

    @property
    def base_url(self) -> str:
        return f"http://{reachable_host(self.config.host)}:{self.port}/v1"

    def session_url(self, session_id: str) -> str:
        return f"http://{self.config.host}:{self.port}/sessions/{session_id}/v1"

    # -- middleware -------------------------------------------------------------------------------------
    @web.middleware
    async def _errors(self, request: web.Request,
                      handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> web.StreamResponse:
        route = request.match_info.route.resource.canonical if request.match_info.route.resource else "unmatched"
        door = MESSAGES_DOOR if request.path.endswith("/v1/messages") else CHAT_DOOR  # before a route sets it
        started = time.monotonic()
        headers: dict[str, str] = {}
        try:
            response = await handler(request)
        except ProxyError as exc:
            if exc.status == 429:
                self.metrics.rejected.labels("quota" if isinstance(exc, QuotaExceeded) else "backpressure").inc()
            response = request.get(DOOR, door).error(exc, headers)
        except UpstreamRejected as exc:
            response = request.get(DOOR, door).rejected(exc.status, exc.body, headers)
        except web.HTTPException as exc:
            exc_status = exc.status if exc.status < 500 else 502
            response = request.get(DOOR, door).error(ProxyError(exc_status, exc.reason or "error"))
        except (ClientGone, asyncio.CancelledError):
            raise
        except Exception:  # noqa: BLE001 - an unexpected bug must still answer in OpenAI's shape
            log.exception("unexpected error on %s", request.path)
            response = request.get(DOOR, door).error(ProxyError(500, "internal proxy error"))
        self.metrics.requests.labels(route, str(response.status)).inc()
        self.metrics.latency.labels(route).observe(time.monotonic() - started)
        return response

    # -- identity ---------------------------------------------------------------------------------------
    def _team(self, request: web.Request) -> str:
        door = request.get(DOOR, CHAT_DOOR)
        key = door.api_key(request)
        if not key:
            raise ProxyError(401, f"missing API key: send '{door.key_header}'")
        team = self.team_keys.team_for(key)
        if team is None:
            raise ProxyError(401, "unknown API key")
        return team

    def _session_id(self, request: web.Request) -> tuple[str, bool]:
        session_id = request.match_info.get("session_id") or request.headers.get(SESSION_HEADER)
        if session_id is None:
            return uuid.uuid4().hex, True
        if not SESSION_ID.match(session_id):
            raise ProxyError(400, "session id must be 1-128 characters from [A-Za-z0-9._:-]", "session_id")
        return session_id, False

    def _call_id(self, request: web.Request, team: str, session_id: str, body: bytes, keyed: bool = True) -> str:
        """The request's key within its session: the name the client gave it, else a digest of its route and body.
        A client SDK's retry sends the same body again, so its attempts share the call id without any state
        here (a retry may reach another proxy worker); the assembler trains the last attempt (`attempt_of`)."""
        for header in CALL_KEY_HEADERS if keyed else ():
            key = request.headers.get(header)
            if key:
                return call_id_of_key(team, session_id, key)
        digest = hashlib.blake2b(f"{team}/{session_id}/{request.path}/".encode(), digest_size=12)
        digest.update(body)
        return digest.hexdigest()

    async def _body(self, request: web.Request) -> bytes:
        if request.content_length is not None and request.content_length > self.config.max_body_bytes:
            raise ProxyError(413, f"request body over {self.config.max_body_bytes} bytes")
        try:
            return await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise ProxyError(413, f"request body over {self.config.max_body_bytes} bytes") from None

    async def _json(self, request: web.Request, raw: bytes | None = None) -> Any:
        raw = await self._body(request) if raw is None else raw
        try:
            return orjson.loads(raw)  # strict: NaN, Infinity and integers past 64 bits are not JSON here
        except orjson.JSONDecodeError as exc:
            raise ProxyError(400, f"request body is not valid JSON: {str(exc)[:200]}") from None

    # -- the calls, whichever front door they came through ------------------------------------------------
    async def _call(self, request: web.Request, door: FrontDoor) -> web.StreamResponse:
        request[DOOR] = door  # errors answer in the door's API shape
        team = self._team(request)
        session = self._session_id(request)
        body = await self._body(request)
        return await self.serve_call(request, door, team, session, body, await self._json(request, body))

    async def serve_call(self, request: web.Request, door: FrontDoor, team: str, session: tuple[str, bool], raw: bytes,
                         body: Any, socket: SocketCall | None = None) -> web.StreamResponse:
        """One call from its parsed body on, for the HTTP routes and each `response.create` on a Responses WebSocket
        (`socket`: its stream and last response; its call id is its frame's digest, not the upgrade's headers)."""
        call = door.parse(body, self.config.max_n)
        check_model(self.config, team, call.model)  # another team's adapter: refused, nothing claimed
        self.sampling.admit(call, team)
        session_id, generated = session
        if isinstance(door, ResponsesDoor):  # a continuation belongs to its stored response's session
            recent = socket.recent if socket else None
            session_id = await self.stored.continue_from(call, team, session_id, generated, recent)
        state = self._claim(session_id, team)
        declared = request.headers.get(PROFILE_HEADER)
        if declared is not None:
            try:
                state.declared = parse_profile(declared)
            except ValueError as exc:
                raise ProxyError(400, str(exc), PROFILE_HEADER) from None
        headers = {SESSION_HEADER: session_id}
        call_id = self._call_id(request, team, session_id, raw, keyed=socket is None)
        who = CallIdentity(session_id, team, call_id, attempt_of(request))
        state.call_started()
        try:
            async with self.quotas.hold(team, session_id), self.admission.slot():
                return await self._serve(request, door, call, who, headers, socket)
        finally:
            state.call_finished()

    async def _serve(self, request: web.Request, door: FrontDoor, call: CallRequest, who: CallIdentity,
                     headers: dict[str, str], socket: SocketCall | None = None) -> web.StreamResponse:
        state = self.sessions.get(who.session_id)
        assert self.http is not None  # start_http() runs before the app serves
        stream = (socket.stream if socket else ClientStream(request, headers)) if call.stream else None
        reply_id = uuid.uuid4().hex  # the reply's own ids (response, items, tool calls): two answers never share one
        run = CallRun(
            call,
            who.session_id,
            self.http,
            self.engines,
            self.gate,
            self.config,
            profile=state.profile if state else None,
            shaper_id=f"{'chatcmpl' if call.kind == 'chat' else 'cmpl'}-{reply_id}",
            on_continuation=self.metrics.continuations.inc,
            adapter=self.config.adapter_of(who.team),
        )
        events = door.events(run.shaper, reply_id) if stream else None
        if stream is not None and events is not None:
            run.emit = lambda chunks: stream.write(b"".join(map(events.chunk, chunks)))
        try:
            capture = await run.run()
            await self.recorder.record(CallResult(who, capture, tuple(run.engine_ids), run.timings_ms(), run.adapter,
                                                  call.sampled))
        except ClientGone:
            assert stream is not None  # only a streaming reply's writes raise it
            return stream.response
        except (ProxyError, UpstreamRejected) as exc:
            status, body = (exc.status, exc.body()) if isinstance(exc, ProxyError) else (exc.status, exc.body)
            if stream is None or not stream.started:
                if isinstance(exc, ProxyError):
                    return door.error(exc, headers)
                return door.rejected(status, body, headers)
            await stream.close(events.fail(status, body) if events else b"")
            return stream.response
        finally:  # the tokens generated, also by a call that failed or whose agent left
            self.quotas.charge(who.team, run.capture.completion_tokens)
        self.metrics.tokens.labels("prompt").inc(capture.prompt_tokens)
        self.metrics.tokens.labels("completion").inc(capture.completion_tokens)
        if stream is None or events is None:
            reply = door.reply(run.shaper, reply_id)
            await self.stored.keep(call, who, capture, reply)  # a Responses call's state, unless store: false
            return json_reply(reply, headers)
        recent = socket.recent if socket else None
        await stream.close(await self.stored.keep_streamed(call, who, capture, events, events.finish(), recent))
        return stream.response

    async def _models(self, request: web.Request) -> web.Response:
        self._team(request)
        if self.config.served_model:
            return web.json_response(
                {
                    "object": "list",
                    "data": [{"id": self.config.served_model, "object": "model", "owned_by": "seamlessflow"}],
                }
            )
        session_id, _ = self._session_id(request)
        engine = self.engines.pick(session_id)
        if engine is None:
            raise ProxyError(503, "no healthy inference engine is available", retry_after=self.config.retry_after_s)
        assert self.http is not None  # start_http() runs before the app serves
        try:
            async with self.http.get(engine.url + "/v1/models", timeout=aiohttp.ClientTimeout(total=10)) as response:
                return web.json_response(await response.json(content_type=None), status=response.status)
        except (TimeoutError, aiohttp.ClientError, ValueError):
            raise ProxyError(502, "the inference engine did not list its models") from None

    # -- episode end ------------------------------------------------------------------------------------
    async def _session_request(self, request: web.Request, model: type[BodyT], what: str) -> tuple[str, str, BodyT]:
        """The team, the session id and the validated body of a request about one session (its end, a reward)."""
        team = self._team(request)
        session_id, _ = self._session_id(request)
        try:
            body = model.model_validate(await self._json(request))
        except ValidationError as exc:
            raise ProxyError(400, f"invalid {what}: {exc.errors(include_url=False, include_input=False)}") from None
        return team, session_id, body

    def _claim(self, session_id: str, team: str, known_from_start: bool = True) -> SessionState:
        try:
            return self.sessions.claim(session_id, team, known_from_start=known_from_start)
        except SessionOwnedByOtherTeam:
            raise ProxyError(403, "this session id belongs to another team", "session_id") from None

    async def _end(self, request: web.Request) -> web.Response:
        team, session_id, end = await self._session_request(request, EndRequest, "episode end")
        state = self._claim(session_id, team, known_from_start=False)
        if state.inflight > 0:  # the end must follow the session's last TokenIO on the topic
            try:
                async with asyncio.timeout(self.config.end_wait_s):
                    await state.idle()
            except TimeoutError:
                raise ProxyError(409, "the session still has calls in flight; end it after they finish") from None
        try:
            call_rewards = {**state.call_rewards, **on_the_wire(team, session_id, end.call_rewards)}
        except ValueError as exc:
            raise ProxyError(400, f"invalid episode end: call_rewards: {exc}", "call_rewards") from None
        # with several workers, the others may have served some of its calls: this one's count is partial
        num_calls = state.events_published if state.known_from_start and self.config.workers == 1 else -1
        event = EpisodeEnd(
            event_id=f"{session_id}.end",
            session_id=session_id,
            team=team,
            run=self.settings.run,
            reward=end.reward,
            status=end.status,
            info_json=json.dumps(end.info),
            num_calls=num_calls,
            created_at_ms=now_ms(),
            group_id=end.group_id,
            task_id=end.task_id,
            call_rewards=call_rewards,
        )
        await self.recorder.publish([event], session_id)
        self.bases.forget(session_id)
        body = {
            "session_id": session_id,
            "num_calls": num_calls,
            "recorded": True,
            "versions": sorted(state.versions),
        }  # which policy versions generated it (an eval pins on these)
        return web.json_response(body, headers={SESSION_HEADER: session_id})

    async def _call_reward(self, request: web.Request) -> web.Response:
        """A reward for one call, kept with the session until its end publishes it (`EpisodeEnd.call_rewards`)."""
        team, session_id, body = await self._session_request(request, CallRewardRequest, "call reward")
        try:
            key = wire_key(team, session_id, request.match_info["call"])
        except ValueError as exc:
            raise ProxyError(400, str(exc), "call") from None
        if self.config.workers > 1:  # the end may reach another worker, which would not know this reward
            raise ProxyError(409, "this proxy runs several workers: send per-call rewards in the session end's "
                                  "call_rewards instead", "call")
        state = self._claim(session_id, team, known_from_start=False)
        state.call_rewards[key] = body.reward
        return web.json_response({"session_id": session_id, "call": key, "reward": body.reward, "recorded": False},
                                 headers={SESSION_HEADER: session_id})

    # -- health and metrics -----------------------------------------------------------------------------
    async def _healthz(self, request: web.Request) -> web.Response:
        engines = [
            {
                "id": e.id,
                "url": e.url,
                "healthy": e.healthy,
                "announced": e.announced,
                "version": e.version,
                "adapter_versions": dict(sorted(e.adapter_versions.items())),
                "hardware_tags": sorted(e.hardware_tags),
            }
            for e in self.engines
        ]
        return web.json_response(
            {
                "status": "ok" if self.engines.routable_count else "no_engines",
                "paused": self.gate.paused,
                "inflight": self.admission.running,
                "queued": self.admission.waiting,
                "sessions": len(self.sessions),
                "engines": engines,
            }
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        self.metrics.paused.set(1 if self.gate.paused else 0)
        self.metrics.engines_routable.set(self.engines.routable_count)
        self.metrics.queue_depth.set(self.admission.waiting)
        self.metrics.inflight.set(self.admission.running)
        return web.Response(body=self.metrics.exposition(), content_type="text/plain", charset="utf-8")

    async def _openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi_document(self.config))

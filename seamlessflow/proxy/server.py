"""The proxy's HTTP service: OpenAI routes, session identity, team auth, backpressure, event publishing.

A call's life: authenticate (team from the bearer key) -> session id (path, header, or generated) ->
validate the body -> admit (bounded slots and queue, else 429) -> `CallRun` streams from the engine ->
one `TokenIO` per choice is published and *acknowledged by Kafka* -> the response completes. If the
events cannot be confirmed the agent gets a retryable 503 (non-streaming) or an SSE error instead of
`[DONE]` (streaming): a response whose tokens were not recorded never looks like a success.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import re
import time
import uuid
from typing import Annotated, Any

import aiohttp
import numpy as np
import orjson
from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from seamlessflow.avro import Codec, CodecError, codec_for
from seamlessflow.config import Settings
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.core.routing import parse_profile
from seamlessflow.messages import EpisodeEnd, TokenIO, now_ms
from seamlessflow.proxy.config import ProxyConfig
from seamlessflow.proxy.deltas import PromptBases, token_sequence
from seamlessflow.proxy.errors import ProxyError, error_response
from seamlessflow.proxy.generation import CallRun, ClientGone, PauseGate, UpstreamRejected
from seamlessflow.proxy.metrics import ProxyMetrics
from seamlessflow.proxy.openapi import openapi_document
from seamlessflow.proxy.publisher import EventPublisher, PublishFailed
from seamlessflow.proxy.requests import CallRequest, parse_call
from seamlessflow.proxy.routing import EngineTable
from seamlessflow.proxy.sessions import SessionOwnedByOtherTeam, SessionTable
from seamlessflow.teams import TeamKeys
from seamlessflow.topics import Topics

log = logging.getLogger(__name__)

SESSION_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
SESSION_HEADER = "X-Session-Id"
PROFILE_HEADER = "X-Session-Profile"  # prefill | decode | auto: declares the session's routing profile
CALL_KEY_HEADERS = ("Idempotency-Key", "X-Request-Id")


class EndRequest(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)  # "1" is not a reward: no coercion from strings

    reward: float
    status: Annotated[EpisodeStatus, Field(strict=False)] = EpisodeStatus.DONE  # from JSON: its value
    info: dict[str, Any] = Field(default_factory=dict)
    group_id: str | None = None
    task_id: str | None = None

    @field_validator("reward")
    @classmethod
    def _finite(cls, value: float) -> float:
        if not math.isfinite(value):
            raise ValueError("reward must be a finite number")
        return value


class ProxyServer:
    def __init__(
        self,
        settings: Settings,
        config: ProxyConfig | None = None,
        codec: Codec | None = None,
        team_keys: TeamKeys | None = None,
        publisher: EventPublisher | None = None,
    ):
        self.settings = settings
        self.config = config or ProxyConfig.from_settings(settings)
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
        self._slots = asyncio.Semaphore(self.config.max_inflight)
        self._waiting = 0
        self._running = 0
        self.http: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.port: int | None = None

    # -- app --------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.config.max_body_bytes, middlewares=[self._errors])
        for prefix in ("", "/sessions/{session_id}"):
            app.router.add_post(prefix + "/v1/chat/completions", self._chat)
            app.router.add_post(prefix + "/v1/completions", self._completions)
            app.router.add_get(prefix + "/v1/models", self._models)
        app.router.add_post("/sessions/{session_id}/end", self._end)
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
        site = web.TCPSite(self._runner, self.config.host, self.config.port, backlog=2048,
                           reuse_port=self.config.workers > 1 or None)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the bound port (config.port may be 0)

    async def stop_http(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self.http is not None:
            await self.http.close()

    @property
    def base_url(self) -> str:
        return f"http://{self.config.host}:{self.port}/v1"

    def session_url(self, session_id: str) -> str:
        return f"http://{self.config.host}:{self.port}/sessions/{session_id}/v1"

    # -- middleware -------------------------------------------------------------------------------------
    @web.middleware
    async def _errors(self, request: web.Request, handler) -> web.StreamResponse:
        route = request.match_info.route.resource.canonical if request.match_info.route.resource else "unmatched"
        started = time.monotonic()
        headers: dict[str, str] = {}
        try:
            response = await handler(request)
        except ProxyError as exc:
            if exc.status == 429:
                self.metrics.rejected.labels("backpressure").inc()
            response = error_response(exc, headers)
        except UpstreamRejected as exc:
            response = web.json_response(exc.body, status=exc.status)
        except web.HTTPException as exc:
            exc_status = exc.status if exc.status < 500 else 502
            response = error_response(ProxyError(exc_status, exc.reason or "error"))
        except (ClientGone, asyncio.CancelledError):
            raise
        except Exception:  # noqa: BLE001 - an unexpected bug must still answer in OpenAI's shape
            log.exception("unexpected error on %s", request.path)
            response = error_response(ProxyError(500, "internal proxy error"))
        self.metrics.requests.labels(route, str(response.status)).inc()
        self.metrics.latency.labels(route).observe(time.monotonic() - started)
        return response

    # -- identity ---------------------------------------------------------------------------------------
    def _team(self, request: web.Request) -> str:
        auth = request.headers.get("Authorization", "")
        key = auth[7:].strip() if auth[:7].lower() == "bearer " else None
        if not key:
            raise ProxyError(401, "missing API key: send 'Authorization: Bearer <team key>'")
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

    def _call_id(self, request: web.Request, team: str, session_id: str) -> str:
        """Stable when the client names its request (a client retry is then recognisable downstream)."""
        for header in CALL_KEY_HEADERS:
            key = request.headers.get(header)
            if key:
                return hashlib.blake2b(f"{team}/{session_id}/{key}".encode(), digest_size=12).hexdigest()
        return uuid.uuid4().hex

    async def _json(self, request: web.Request) -> Any:
        if request.content_length is not None and request.content_length > self.config.max_body_bytes:
            raise ProxyError(413, f"request body over {self.config.max_body_bytes} bytes")
        try:
            raw = await request.read()
        except web.HTTPRequestEntityTooLarge:
            raise ProxyError(413, f"request body over {self.config.max_body_bytes} bytes") from None
        try:
            return orjson.loads(raw)  # strict: NaN, Infinity and integers past 64 bits are not JSON here
        except orjson.JSONDecodeError as exc:
            raise ProxyError(400, f"request body is not valid JSON: {str(exc)[:200]}") from None

    # -- OpenAI routes ----------------------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        return await self._call(request, "chat")

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        return await self._call(request, "completions")

    async def _call(self, request: web.Request, kind) -> web.StreamResponse:
        team = self._team(request)
        session_id, generated = self._session_id(request)
        call = parse_call(kind, await self._json(request), self.config.max_n)
        try:
            session = self.sessions.claim(session_id, team)
        except SessionOwnedByOtherTeam:
            raise ProxyError(403, "this session id belongs to another team", "session_id") from None
        declared = request.headers.get(PROFILE_HEADER)
        if declared is not None:
            try:
                session.declared = parse_profile(declared)
            except ValueError as exc:
                raise ProxyError(400, str(exc), PROFILE_HEADER) from None
        headers = {SESSION_HEADER: session_id}
        call_id = self._call_id(request, team, session_id)
        session.call_started()
        try:
            async with self._admitted():
                return await self._serve(request, call, session_id, team, call_id, headers)
        finally:
            session.call_finished()

    async def _serve(self, request, call: CallRequest, session_id, team, call_id, headers) -> web.StreamResponse:
        stream = _ClientStream(request, headers) if call.stream else None
        state = self.sessions.get(session_id)
        assert self.http is not None  # start_http() runs before the app serves
        run = CallRun(
            call, session_id, self.http, self.engines, self.gate, self.config, profile=state.profile if state else None,
            shaper_id=f"{'chatcmpl' if call.kind == 'chat' else 'cmpl'}-{call_id}",
            emit=stream.send if stream else None,
            on_continuation=self.metrics.continuations.inc,
        )
        try:
            capture = await run.run()
            await self._record(run, session_id, team, call_id)
        except ClientGone:
            assert stream is not None  # only a streaming reply's writes raise it
            return stream.response
        except (ProxyError, UpstreamRejected) as exc:
            if stream is None or not stream.started:
                if isinstance(exc, ProxyError):
                    return error_response(exc, headers)
                return web.json_response(exc.body, status=exc.status, headers=headers)
            await stream.fail(exc.body() if isinstance(exc, ProxyError) else exc.body)
            return stream.response
        self.metrics.tokens.labels("prompt").inc(capture.prompt_tokens)
        self.metrics.tokens.labels("completion").inc(capture.completion_tokens)
        if stream is None:
            return json_reply(run.shaper.response(), headers)
        if call.include_usage:
            await stream.send(run.shaper.usage_chunk())
        await stream.finish()
        return stream.response

    async def _record(self, run: CallRun, session_id: str, team: str, call_id: str) -> None:
        """Publishes one TokenIO per choice and waits for Kafka's acknowledgement (else 503); then the
        choices' sequences become bases for the session's next prompts (`deltas.py`)."""
        queue_ms, first_ms, total_ms = run.timings_ms()
        events, sequences = [], []
        for choice in run.capture.choices:
            sequence, n_prompt = token_sequence(choice.prompt_ids, choice.completion_ids), len(choice.prompt_ids)
            base = self.bases.base_for(session_id, sequence[:n_prompt]) if self.config.prompt_deltas else None
            events.append(TokenIO(
                event_id=event_id(call_id, choice.index, n_prompt, sequence),
                session_id=session_id,
                team=team,
                run=self.settings.run,
                call_id=call_id,
                engine_id=run.engine_ids[0] if run.engine_ids else "",
                choice_index=choice.index,
                prompt_ids=choice.prompt_ids[base[1]:] if base else choice.prompt_ids,
                completion_ids=choice.completion_ids,
                logprobs=choice.logprobs,
                versions=choice.versions,
                finish_reason=choice.finish_reason or "unknown",
                queue_ms=queue_ms,
                first_token_ms=first_ms,
                total_ms=total_ms,
                created_at_ms=now_ms(),
                prompt_base_id=base[0] if base else None,
                prompt_base_tokens=base[1] if base else 0,
            ))
            sequences.append(sequence)
        await self._publish_all(events, session_id)
        if self.config.prompt_deltas:
            for event, sequence in zip(events, sequences, strict=True):
                self.bases.remember(session_id, event.event_id, sequence)
        state = self.sessions.get(session_id)
        if state is not None:
            state.events_published += len(events)
            state.observe(run.capture.prompt_tokens, run.capture.completion_tokens)
            state.versions.update(v for choice in run.capture.choices for v in choice.versions)

    async def _publish_all(self, events: list, key: str) -> None:
        try:
            futures = [self.publisher.publish(self.topic, key, event) for event in events]
            async with asyncio.timeout(self.config.delivery_timeout_s):
                await asyncio.gather(*futures)
        except (TimeoutError, PublishFailed, CodecError) as exc:
            self.metrics.events.labels("failed").inc(len(events))
            log.error("events for session %s not recorded: %s", key, exc)
            raise ProxyError(
                503, "the call's token events could not be recorded; retry", retry_after=self.config.retry_after_s
            ) from None
        self.metrics.events.labels("produced").inc(len(events))

    def _admitted(self):
        return _Admission(self)

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
    async def _end(self, request: web.Request) -> web.Response:
        team = self._team(request)
        session_id, _ = self._session_id(request)
        try:
            end = EndRequest.model_validate(await self._json(request))
        except ValidationError as exc:
            raise ProxyError(
                400, f"invalid episode end: {exc.errors(include_url=False, include_input=False)}"
            ) from None
        try:
            state = self.sessions.claim(session_id, team, known_from_start=False)
        except SessionOwnedByOtherTeam:
            raise ProxyError(403, "this session id belongs to another team", "session_id") from None
        if state.inflight > 0:  # the end must follow the session's last TokenIO on the topic
            try:
                async with asyncio.timeout(self.config.end_wait_s):
                    await state.idle.wait()
            except TimeoutError:
                raise ProxyError(409, "the session still has calls in flight; end it after they finish") from None
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
        )
        await self._publish_all([event], session_id)
        self.bases.forget(session_id)
        body = {"session_id": session_id, "num_calls": num_calls, "recorded": True,
                "versions": sorted(state.versions)}  # which policy versions generated it (an eval pins on these)
        return web.json_response(body, headers={SESSION_HEADER: session_id})

    # -- health and metrics -----------------------------------------------------------------------------
    async def _healthz(self, request: web.Request) -> web.Response:
        engines = [{"id": e.id, "url": e.url, "healthy": e.healthy, "announced": e.announced, "version": e.version,
                    "hardware_tags": sorted(e.hardware_tags)} for e in self.engines]
        return web.json_response(
            {
                "status": "ok" if self.engines.routable_count else "no_engines",
                "paused": self.gate.paused,
                "inflight": self._running,
                "queued": self._waiting,
                "sessions": len(self.sessions),
                "engines": engines,
            }
        )

    async def _metrics(self, request: web.Request) -> web.Response:
        self.metrics.paused.set(1 if self.gate.paused else 0)
        self.metrics.engines_routable.set(self.engines.routable_count)
        self.metrics.queue_depth.set(self._waiting)
        self.metrics.inflight.set(self._running)
        return web.Response(body=self.metrics.exposition(), content_type="text/plain", charset="utf-8")

    async def _openapi(self, request: web.Request) -> web.Response:
        return web.json_response(openapi_document(self.config))


class _Admission:
    """A generation slot, or 429 when slots and queue are full; waiting counts as queue depth."""

    def __init__(self, server: ProxyServer):
        self.server = server

    async def __aenter__(self) -> None:
        s = self.server
        if s._waiting + s._running >= s.config.max_inflight + s.config.max_queued:
            raise ProxyError(429, "the proxy is at capacity; retry shortly", retry_after=s.config.retry_after_s)
        s._waiting += 1
        try:
            async with asyncio.timeout(s.config.pause_timeout_s):
                await s._slots.acquire()
        except TimeoutError:
            raise ProxyError(
                503, "no generation slot became free in time; retry", retry_after=s.config.retry_after_s
            ) from None
        finally:
            s._waiting -= 1
        s._running += 1

    async def __aexit__(self, *exc) -> None:
        self.server._running -= 1
        self.server._slots.release()


class _ClientStream:
    """The agent's SSE response, opened at the first chunk so earlier errors can still be plain HTTP errors."""

    def __init__(self, request: web.Request, headers: dict):
        self.request = request
        self.response = web.StreamResponse(
            headers={**headers, "Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        self.started = False

    async def send(self, chunk: dict) -> None:
        await self._write(b"data: " + orjson.dumps(chunk) + b"\n\n")

    async def fail(self, body: dict) -> None:
        await self._write(b"data: " + json.dumps(body).encode() + b"\n\n")
        await self._eof()

    async def finish(self) -> None:
        await self._write(b"data: [DONE]\n\n")
        await self._eof()

    async def _write(self, data: bytes) -> None:
        try:
            if not self.started:
                self.started = True
                await self.response.prepare(self.request)
            await self.response.write(data)
        except (ConnectionError, aiohttp.ClientConnectionResetError) as exc:
            raise ClientGone() from exc

    async def _eof(self) -> None:
        try:
            await self.response.write_eof()
        except (ConnectionError, aiohttp.ClientConnectionResetError):
            pass


def json_reply(body: Any, headers: dict[str, str]) -> web.Response:
    """A JSON response serialised by orjson (the call's reply is on every call's path)."""
    return web.Response(body=orjson.dumps(body), content_type="application/json", headers=headers)


def event_id(call_id: str, choice: int, n_prompt: int, sequence: np.ndarray) -> str:
    """`<call_id>-<tokens digest>.<choice>`. A client retry under the same Idempotency-Key keeps the call id
    (recognisable downstream), and a copy of the same record keeps the whole id (de-duplicated). But when the
    first attempt was recorded and its reply lost (the proxy died between Kafka's acknowledgement and the
    reply), the retry generates anew: different tokens, so a different id, and both are kept (a fork) instead
    of the first shadowing the tokens the agent actually received (found by a chaos run). The digest runs
    over the prompt's length and the choice's int32 sequence (`deltas.token_sequence`)."""
    tokens = n_prompt.to_bytes(4, "little") + sequence.tobytes()
    digest = hashlib.blake2b(tokens, digest_size=4).hexdigest()
    return f"{call_id}-{digest}.{choice}"

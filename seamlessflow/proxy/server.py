"""The proxy's HTTP service: its layers wired, top to bottom, and its routes.

A call passes the layers once (`calls.py` draws them): its front door parses it (`doors.py` and the
`*_door.py` modules) -> the gatekeeper checks who calls, as which session, and when (`gatekeeper.py`) -> the
state puts a continuation's stored conversation before it (`state.py`) -> generation runs it on the engines
(`generation.py`) -> recording publishes one `TokenIO` per choice and waits for *Kafka's acknowledgement*
(`recording.py`); on the way back the state keeps a Responses call's response and the door renders the reply.
If the events cannot be confirmed the agent gets a retryable 503 (non-streaming) or an SSE error instead of
`[DONE]` (streaming): a response whose tokens were not recorded never looks like a success.
"""

from __future__ import annotations

from aiohttp import web

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.messages import StoredConversation, StoredResponse
from seamlessflow.model.sampling import SamplingOptions
from seamlessflow.ports import reachable_host
from seamlessflow.proxy.admission import Admission
from seamlessflow.proxy.anthropic_door import MessagesDoor
from seamlessflow.proxy.compact_door import CompactDoor
from seamlessflow.proxy.conversations import Conversations
from seamlessflow.proxy.deltas import PromptBases
from seamlessflow.proxy.doors import CallRoute, FrontDoor, OpenAIDoor, bearer_key, errors_middleware, session_named
from seamlessflow.proxy.engine_fence import EngineFence
from seamlessflow.proxy.gatekeeper import Gatekeeper
from seamlessflow.proxy.generation import Generation, PauseGate
from seamlessflow.proxy.metrics import ProxyMetrics
from seamlessflow.proxy.openapi import openapi_document
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.publisher import EventPublisher
from seamlessflow.proxy.quotas import Quotas
from seamlessflow.proxy.recording import Recorder
from seamlessflow.proxy.responses_door import ResponsesDoor
from seamlessflow.proxy.routing import EngineTable
from seamlessflow.proxy.sampling import SamplingGate
from seamlessflow.proxy.session_door import SessionDoor
from seamlessflow.proxy.sessions import SessionTable
from seamlessflow.proxy.socket_door import SocketDoor
from seamlessflow.proxy.state import ResponseState
from seamlessflow.proxy.stored_door import StoredDoor
from seamlessflow.proxy.topic_store import TopicStore
from seamlessflow.teams import TeamKeys
from seamlessflow.topics import Topics

CHAT_DOOR = OpenAIDoor("chat")
MESSAGES_DOOR = MessagesDoor()
DOORS: dict[str, FrontDoor] = {
    "/v1/chat/completions": CHAT_DOOR,
    "/v1/completions": OpenAIDoor("completions"),
    "/v1/responses": ResponsesDoor(),
    "/v1/responses/compact": CompactDoor(),  # a summary by the policy, recorded; what follows it forks
    "/v1/messages": MESSAGES_DOOR,
}


def door_of(request: web.Request) -> FrontDoor:
    """The door whose shape an error takes before a route named its own."""
    return MESSAGES_DOOR if request.path.endswith("/v1/messages") else CHAT_DOOR


class ProxyServer:
    def __init__(
        self,
        settings: Settings,
        options: ProxyOptions | None = None,
        codec: Codec | None = None,
        team_keys: TeamKeys | None = None,
        publisher: EventPublisher | None = None,
    ):
        self.settings = settings
        o = self.options = options or ProxyOptions.from_settings(settings)
        self.codec = codec or codec_for(settings)
        self.team_keys = team_keys or TeamKeys.from_settings(settings)
        self.metrics = ProxyMetrics()
        self.publisher = publisher or EventPublisher(settings, self.codec, **o.producer)
        topics = Topics(settings)
        # the bottom layer first: each layer is handed the one below it
        self.recorder = Recorder(self.publisher, topics.session_events, settings.run,
                                 PromptBases(o.prompt_delta_bases, o.prompt_delta_memory_mb << 20), self.metrics,
                                 o.delivery_timeout_s, o.retry_after_s, o.prompt_deltas)
        self.engines = EngineTable(o.health_failures, o.routing.fit_table())
        for engine in o.engines:
            self.engines.add(engine.id, engine.url, engine.weight_version,
                             hardware_tags=frozenset(engine.hardware_tags))
        self.gate = PauseGate()  # paused for a weight update: nothing is dispatched
        self.generation = Generation(o, self.engines, self.gate, self.metrics, self.recorder)
        conversations = Conversations(self._topic_store(topics.conversations, StoredConversation, "conversation_id"),
                                      settings.run, settings.max_record_bytes)
        self.stored = ResponseState(self._topic_store(topics.responses, StoredResponse, "response_id"), conversations,
                                    o, settings.run, settings.max_record_bytes, self.generation)
        self.sessions = SessionTable(o.max_sessions, o.routing.learner if o.routing.learn else None)
        self.quotas = Quotas(o.teams, self.metrics, o.retry_after_s)  # each team's share, before a slot
        self.admission = Admission(o.max_inflight, o.max_queued, o.pause_timeout_s, o.retry_after_s)
        self.gatekeeper = Gatekeeper(o, self.team_keys, self.sessions,
                                     SamplingGate(SamplingOptions.of(settings).rule(), self.metrics), self.quotas,
                                     self.admission, self.stored)
        self.sockets = SocketDoor(self.gatekeeper, self.stored, o)
        self.fence = EngineFence(self.engines, self.gate)
        self._runner: web.AppRunner | None = None
        self._fence_runner: web.AppRunner | None = None
        self.port: int | None = None
        self.fence_port: int | None = None

    def _topic_store(self, topic: str, kind: type, key: str) -> TopicStore:
        o = self.options
        return TopicStore(self.settings, self.codec, self.publisher, topic, o.stored_cache_mb << 20, o.stored_wait_s,
                          o.delivery_timeout_s, kind, key)

    # -- app --------------------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=self.options.max_body_bytes,
                              middlewares=[errors_middleware(self.metrics, door_of)])
        stored = StoredDoor(self.gatekeeper, self.stored, self.stored.conversations)
        for prefix in ("", "/sessions/{session_id}"):
            for path, door in DOORS.items():
                app.router.add_post(prefix + path, CallRoute(door, self.gatekeeper, self.options))
            app.router.add_get(prefix + "/v1/models", self._models)
            app.router.add_get(prefix + "/v1/responses", self.sockets.open)  # the Responses API's WebSocket mode
            stored.add_routes(app, prefix)
        SessionDoor(self.gatekeeper, self.recorder, self.options.max_body_bytes).add_routes(app)
        app.router.add_get("/healthz", self._healthz)
        app.router.add_get("/metrics", self._metrics)
        app.router.add_get("/openapi.json", self._openapi)
        return app

    async def start_http(self) -> None:
        self.generation.open()
        self._runner = web.AppRunner(self.app(), access_log=None, handler_cancellation=True)
        await self._runner.setup()
        # several workers listen on one port; the kernel spreads connections over them (`stack.proxy_services`)
        o = self.options
        site = web.TCPSite(self._runner, o.host, o.port, backlog=2048, reuse_port=o.workers > 1 or None)
        await site.start()
        self.port = self._runner.addresses[0][1]  # the bound port (options.port may be 0)
        await self._start_fence_site()

    async def _start_fence_site(self) -> None:
        """The engine fence on a port of this worker's own, never on the agents' port: an agent must not be able to
        hold an engine, and a shared port (several workers) would hand a hold to one worker only."""
        fence_app = web.Application(middlewares=[errors_middleware(self.metrics, door_of)])
        self.fence.add_routes(fence_app)
        self._fence_runner = web.AppRunner(fence_app, access_log=None)
        await self._fence_runner.setup()
        await web.TCPSite(self._fence_runner, self.options.host, 0).start()
        self.fence_port = self._fence_runner.addresses[0][1]

    async def stop_http(self) -> None:
        if self._fence_runner is not None:
            await self._fence_runner.cleanup()
        if self._runner is not None:
            await self._runner.cleanup()
        await self.generation.close()

    @property
    def fence_url(self) -> str:
        """Where a weight update holds and releases this process's engines (`engine_fence.py`)."""
        return f"http://{reachable_host(self.options.host)}:{self.fence_port}"

    @property
    def base_url(self) -> str:
        return f"http://{reachable_host(self.options.host)}:{self.port}/v1"

    def session_url(self, session_id: str) -> str:
        return f"http://{self.options.host}:{self.port}/sessions/{session_id}/v1"

    # -- what the proxy serves besides calls -------------------------------------------------------------
    async def _models(self, request: web.Request) -> web.Response:
        self.gatekeeper.team(bearer_key(request), CHAT_DOOR.key_header)
        if self.options.served_model:
            return web.json_response(
                {"object": "list", "data": [{"id": self.options.served_model, "object": "model",
                                             "owned_by": "seamlessflow"}]}
            )
        session_id = self.gatekeeper.session_of(self.gatekeeper.session_named(session_named(request)), None)
        status, body = await self.generation.models(session_id)
        return web.json_response(body, status=status)

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
        return web.json_response(openapi_document(self.options))

"""The whole proxy process: HTTP server, Kafka publisher, control listener, stored-responses follower, engine
health checks, heartbeat.

`ProxyService(settings).start()` from a running event loop; `stop()` drains the producer. Used by
`services/proxy` (the process) and by tests (in-process, port 0).
"""

from __future__ import annotations

import asyncio
import logging

import aiohttp

from seamlessflow.config import Settings
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.heartbeat import Heartbeat
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import CommandAck, DeadLetter, ResourceStatus
from seamlessflow.proxy.commands import CommandHandler
from seamlessflow.proxy.control_view import ControlListener
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.publisher import PublishFailed
from seamlessflow.proxy.server import ProxyServer
from seamlessflow.teams import TeamKeys
from seamlessflow.topics import Topics

log = logging.getLogger(__name__)


class ProxyService:
    def __init__(self, settings: Settings, options: ProxyOptions | None = None,
                 team_keys: TeamKeys | None = None) -> None:
        self.settings = settings
        self.server = ProxyServer(settings, options=options, team_keys=team_keys)
        self.options = self.server.options
        topics = Topics(settings)
        self.status_topic = topics.status
        self.commands = CommandHandler(
            self.options.id, self.server.gate, self.server.engines, self._publish_ack,
            settings.team, settings.run, drain_timeout_s=self.options.pause_timeout_s,
            generation=settings.generation,
        )
        wanted = ([topics.control] if self.options.listen_control else []) + (
            [topics.status] if self.options.discover_engines else []
        )
        self.dead_letters = DeadLetters(settings, self.server.codec, f"proxy:{self.options.id}", self._send_dead_letter)
        self.listener = ControlListener(settings, self.server.codec, wanted, self.commands.on_message,
                                        self.dead_letters, self.commands.protocol.addressed, topics.control,
                                        self.commands.on_history) if wanted else None
        self.heartbeat = Heartbeat(self.server.publisher.publish, self.status_topic, self.options.heartbeat_s,
                                   self._status)
        self._tasks: list[asyncio.Task] = []
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def session_url(self, session_id: str) -> str:
        return self.server.session_url(session_id)

    async def start(self) -> ProxyService:
        self._loop = asyncio.get_running_loop()
        self.server.publisher.start()
        if self.listener is not None:
            self.listener.start()
        self.server.stored.start()  # follows the responses and conversations topics: what any worker stored
        await self.server.start_http()
        loop = asyncio.get_running_loop()
        self._tasks = [loop.create_task(self._health_loop()), loop.create_task(self.heartbeat.run_async())]
        return self

    async def wait_listening(self, timeout_s: float = 30.0) -> None:
        """Until the control listener is assigned (tests send commands only after this)."""
        if self.listener is not None:
            await asyncio.get_running_loop().run_in_executor(None, self.listener.ready.wait, timeout_s)

    async def stop(self) -> None:
        for task in self._tasks:
            task.cancel()
        if self._tasks:  # bounded: a loop that swallowed its cancel must not stop the shutdown
            _, stuck = await asyncio.wait(self._tasks, timeout=5)
            for task in stuck:
                log.error("proxy task %s did not stop when cancelled", task.get_coro())
        await self.server.stop_http()
        self.server.stored.stop()
        if self.listener is not None:
            self.listener.stop()
        left = self.server.publisher.close()
        if left:
            log.error("%d events were not delivered at shutdown", left)

    async def _publish_ack(self, ack: CommandAck) -> None:
        await self.server.publisher.publish(self.status_topic, f"{self.options.id}/ack", ack)

    def _send_dead_letter(self, topic: str, key: str | None, letter: DeadLetter) -> None:
        """Called on the listener's thread: the letter is published from the event loop, failures logged."""
        assert self._loop is not None  # set by start(), before the listener runs
        self._loop.call_soon_threadsafe(self._publish_dead_letter, topic, key, letter)

    def _publish_dead_letter(self, topic: str, key: str | None, letter: DeadLetter) -> None:
        try:
            future = self.server.publisher.publish(topic, key, letter)
        except PublishFailed as exc:
            log.error("dead letter %s not published: %s", letter.event_id, exc)
            return

        def report(f: asyncio.Future) -> None:
            if not f.cancelled() and f.exception():
                log.error("dead letter %s not published: %s", letter.event_id, f.exception())

        future.add_done_callback(report)

    async def _health_loop(self) -> None:
        timeout = aiohttp.ClientTimeout(total=max(1.0, self.options.health_interval_s))
        while True:
            engines = list(self.server.engines)
            results = await asyncio.gather(*(self.server.generation.healthy(e.url, timeout) for e in engines))
            for engine, ok in zip(engines, results, strict=True):
                self.server.engines.health_result(engine, ok)
            await asyncio.sleep(self.options.health_interval_s)

    def _status(self) -> ResourceStatus:
        server = self.server
        versions = [e.version for e in server.engines] or [0]
        figures = {"inflight": server.admission.running, "queued": server.admission.waiting,
                   "engines_routable": server.engines.routable_count, "sessions": len(server.sessions)}
        return resource_status(
            self.options.id,
            ResourceKind.PROXY,
            ResourceState.PAUSED if server.gate.paused else ResourceState.ACTIVE,
            ResourceKind.PROXY,
            self.settings.team,
            self.settings.run,
            capability_tags=[ResourceKind.PROXY],
            weight_version=max(versions),
            figures=figures,
            engine_url=server.fence_url if server.fence_port else None,  # a proxy's: where weight updates fence it
            epoch=max(self.commands.last_epoch, 0),
        )

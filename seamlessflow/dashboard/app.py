"""The web dashboard: one static page and a few JSON endpoints over `DashboardState`, served with aiohttp
(the proxy's HTTP library). A thread follows the status, weights, eval and session-events topics into the
state; the page polls the endpoints every few seconds. Nothing is fetched from the network: the page's
script and plots (plain SVG) ship with the package.

Endpoints: `/api/overview` (resources with tags, roles, versions; the stack's services when run beside
`seamlessflow up`), `/api/curves` (scalar points per step; the mismatch curve's threshold), `/api/timeline`
(role intervals, bubble ratio), `/api/sessions`, `/api/sessions/{id}` (a session the way `replay` shows it),
`/metrics`.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path

from aiohttp import web
from prometheus_client import REGISTRY, generate_latest

from seamlessflow.config import Settings
from seamlessflow.dashboard.options import DashboardOptions
from seamlessflow.dashboard.state import DashboardState, Decode
from seamlessflow.kafka.clients import private_group
from seamlessflow.stack.supervisor import read_state
from seamlessflow.tracking.follow import Follower
from seamlessflow.tracking.points import PointMaker

STATIC = Path(__file__).parent / "static"
log = logging.getLogger(__name__)


class Dashboard:
    def __init__(self, settings: Settings, decode: Decode | None = None):
        self.settings = settings
        # in an adapters stack each team's trainer has curves of its own (which is whose: from the settings)
        self.state = DashboardState(settings.team, settings.run, decode=decode,
                                    maker=PointMaker.for_settings(settings), mismatch_warn=mismatch_warn(settings))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # -- following Kafka ----------------------------------------------------------------------------------

    def start_following(self) -> None:
        self._thread = threading.Thread(target=self._follow, name="dashboard-follow", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def _follow(self) -> None:
        group = private_group(self.settings, "dashboard")  # never commits: reads all
        follower = None
        while not self._stop.is_set():
            try:
                if follower is None:
                    follower = Follower(self.settings, group, names=("status", "weights", "session-events"))
                for incoming in follower.poll(max_records=1000, timeout_s=0.5):
                    self.state.feed(incoming)
                self.state.release_overdue(time.monotonic())
            except Exception as exc:  # the broker may be restarting: the page shows what it has
                log.warning("dashboard: reading Kafka failed (%s); retrying", exc)
                follower = None
                self._stop.wait(2.0)
        if follower is not None:
            follower.close()

    # -- web ------------------------------------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/", self._index)
        app.router.add_static("/static/", STATIC)
        app.router.add_get("/api/overview", self._overview)
        app.router.add_get("/api/curves", self._answer(self.state.curves_json))
        app.router.add_get("/api/timeline", self._answer(self.state.timeline_json))
        app.router.add_get("/api/sessions", self._answer(self.state.sessions_json))
        app.router.add_get("/api/sessions/{session_id}", self._session)
        app.router.add_get("/metrics", self._metrics)
        return app

    @staticmethod
    def _answer(make: Callable[[], object]) -> Callable[[web.Request], Awaitable[web.Response]]:
        """A handler answering `make()` as JSON, computed off the event loop (a long timeline takes a while)."""
        async def handler(_: web.Request) -> web.Response:
            return _json(await asyncio.to_thread(make))
        return handler

    async def _index(self, _: web.Request) -> web.FileResponse:
        return web.FileResponse(STATIC / "index.html")

    async def _overview(self, _: web.Request) -> web.Response:
        data = await asyncio.to_thread(self.state.overview)
        data["services"] = self._services()
        return _json(data)

    def _services(self) -> list[dict]:
        """The processes `seamlessflow up` supervises here, with their /metrics (empty for a remote stack)."""
        run = Path(self.settings.data_dir).resolve() / "run"
        state = read_state(run) or {}
        ports_file = run / "metrics.json"
        metrics = json.loads(ports_file.read_text()) if ports_file.exists() else {}
        return [{"name": name, "state": s.get("state"), "pid": s.get("pid"), "restarts": s.get("restarts", 0),
                 "metrics": metrics.get(name)} for name, s in sorted(state.get("services", {}).items())]

    async def _session(self, request: web.Request) -> web.Response:
        detail = await asyncio.to_thread(self.state.session_detail, request.match_info["session_id"])
        if detail is None:
            raise web.HTTPNotFound(text="no such session in the dashboard's window")
        return _json(detail)

    async def _metrics(self, _: web.Request) -> web.Response:
        return web.Response(body=generate_latest(REGISTRY), content_type="text/plain")


def _json(data: object) -> web.Response:
    return web.json_response(_finite(data), dumps=lambda d: json.dumps(d, allow_nan=False, default=str))


def _finite(value: object) -> object:
    """NaN and infinities (a figure not defined yet) become null: JSON has no NaN."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def mismatch_warn(settings: Settings) -> float | None:
    """The trainer's warning threshold on the train-inference mismatch (`trainer.mismatch_warn`), as the trainer
    reads it; None when the trainer's options do not say (or do not validate: the trainer reports that)."""
    from pydantic import ValidationError

    from seamlessflow.trainer.options import TrainerOptions

    try:
        return getattr(TrainerOptions.from_settings(settings), "mismatch_warn", None)
    except ValidationError:
        return None


def model_decoder(settings: Settings, tokenizer: str | None = None) -> Decode | None:
    """Token text for the sessions browser: the given tokenizer, else the served model's, else ids only."""
    from seamlessflow.model.choice import model_dir

    path = Path(tokenizer) if tokenizer else model_dir(settings)
    file = path / "tokenizer.json" if path.is_dir() else path
    if not file.is_file():
        return None
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(file))

    def decode(ids: Sequence[int]) -> str:
        return tok.decode(list(ids), skip_special_tokens=False)
    return decode


async def serve(dashboard: Dashboard, host: str, port: int, stop: threading.Event) -> None:
    """Serves until `stop` is set."""
    runner = web.AppRunner(dashboard.app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    dashboard.start_following()
    try:
        while not stop.is_set():
            await asyncio.sleep(0.2)
    finally:
        dashboard.stop()
        await runner.cleanup()


def run_dashboard(settings: Settings, stop: threading.Event, host: str | None = None, port: int | None = None,
                  tokenizer: str | None = None, announce: Callable[[str], None] = print) -> None:
    """The dashboard against the stack `settings` point at, until `stop` is set (the service and the CLI)."""
    options = DashboardOptions.from_settings(settings)
    host, port = host or options.host, port or options.port
    dashboard = Dashboard(settings, decode=model_decoder(settings, tokenizer or options.tokenizer))
    announce(f"dashboard: http://{host}:{port}/  (team {settings.team}, run {settings.run}, "
             f"Kafka {settings.kafka_bootstrap})")
    asyncio.run(serve(dashboard, host, port, stop))

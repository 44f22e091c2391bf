"""One agent call from dispatch to its last token, surviving pauses and engine failures.

The call streams from its session's engine. A pause cuts the stream (the engine aborts the request when
the connection closes) but keeps every token received; after resume each unfinished choice continues as
a token-in continuation (`/v1/completions` with prompt = prompt ids + tokens so far, the remaining
`max_tokens`), and its new tokens carry the engine's new policy version. An engine that fails mid-stream
is handled the same way on another engine, and so is a call whose engine leaves the rollout role (its
resource was switched to train): that is how in-flight calls move off a preempted resource. A cut call
waits up to `pause_timeout_s` for some engine to take it. The agent sees one response under one id.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable

import aiohttp
import orjson

from seamlessflow.core.routing import Profile
from seamlessflow.core.sampling import upstream_sampling
from seamlessflow.proxy.calls import Call
from seamlessflow.proxy.capture import CallCapture, ChoiceCapture, UpstreamFormatError, read_chunk
from seamlessflow.proxy.errors import ProxyError, explain_window
from seamlessflow.proxy.metrics import ProxyMetrics
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.recording import CallResult, Recorder
from seamlessflow.proxy.requests import CallRequest
from seamlessflow.proxy.routing import Engine, EngineTable
from seamlessflow.proxy.shaping import Shaper
from seamlessflow.proxy.sse import SSESplitter

PATHS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}
JSON_BODY = {"Content-Type": "application/json"}  # bodies go out as orjson bytes, not through stdlib json
END_OF_BODY_S = 1.0  # how long a stream's end is awaited after its `[DONE]`
SAMPLING_KEYS = (
    "temperature", "top_p", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty",
    "stop", "stop_token_ids", "ignore_eos", "seed", "logit_bias", "skip_special_tokens",
    "spaces_between_special_tokens", "include_stop_str_in_output", "bad_words", "allowed_token_ids",
)


class ClientGone(Exception):
    """The agent closed its connection; the call is abandoned and publishes nothing."""


class UpstreamRejected(Exception):
    """The engine answered 4xx: the request itself is wrong; the agent gets the engine's answer."""

    def __init__(self, status: int, body: dict):
        super().__init__(status)
        self.status = status
        self.body = body


class PauseGate:
    """Open or closed for dispatching; knows the calls generating now so a pause can cut them."""

    def __init__(self) -> None:
        self._open = asyncio.Event()
        self._open.set()
        self.active: set[CallRun] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    @property
    def paused(self) -> bool:
        return not self._open.is_set()

    def close(self, cut: bool) -> int:
        self._open.clear()
        if not cut:
            return 0
        for run in list(self.active):
            run.cut()
        return len(self.active)

    def open(self) -> None:
        self._open.set()

    def cut_on(self, engine_url: str) -> int:
        """Cut the calls generating on one engine (it left rollout); they continue elsewhere."""
        runs = [run for run in self.active if run.engine_url == engine_url]
        for run in runs:
            run.cut()
        return len(runs)

    async def wait_off(self, engine_url: str, timeout_s: float, every_s: float = 0.005) -> bool:
        """Until no call streams from `engine_url` (True), or `timeout_s` passes (False). A cut call leaves
        in its stream's `finally`, after the last token it read: once this returns, nothing more of that
        engine's streams is read."""
        deadline = time.monotonic() + timeout_s
        while any(run.engine_url == engine_url for run in self.active):
            if time.monotonic() >= deadline:
                return False
            await asyncio.sleep(every_s)
        return True

    async def wait_open(self, timeout_s: float) -> None:
        if self._open.is_set():
            return
        try:
            async with asyncio.timeout(timeout_s):
                await self._open.wait()
        except TimeoutError:
            raise ProxyError(503, "generation is paused for a weight update; retry later", retry_after=5) from None

    async def wait_idle(self, timeout_s: float) -> bool:
        try:
            async with asyncio.timeout(timeout_s):
                await self._idle.wait()
            return True
        except TimeoutError:
            return False

    def enter(self, run: CallRun) -> None:
        self.active.add(run)
        self._idle.clear()

    def leave(self, run: CallRun) -> None:
        self.active.discard(run)
        if not self.active:
            self._idle.set()


class CallRun:
    def __init__(
        self,
        request: CallRequest,
        session_id: str,
        http: aiohttp.ClientSession,
        engines: EngineTable,
        gate: PauseGate,
        options: ProxyOptions,
        shaper_id: str,
        emit: Callable[[list[dict]], Awaitable[None]] | None = None,
        on_continuation: Callable[[], None] | None = None,
        profile: Profile | None = None,
        adapter: str | None = None,
    ) -> None:
        self.request = request
        self.adapter = adapter  # the team's LoRA adapter (`proxy.teams.<team>.lora`): the upstream model; None: base
        self.upstream_model = adapter or options.served_model
        self.session_id = session_id
        self.profile = profile  # routing profile of the session when the call started
        self.http = http
        self.engines = engines
        self.gate = gate
        self.options = options
        self.emit = emit
        self.on_continuation = on_continuation or (lambda: None)
        self.capture = CallCapture(request.n, request.num_prompts)
        override = request.model if self.upstream_model else None  # the agent sees the model it asked for
        self.shaper = Shaper(request, self.capture, shaper_id, model=override)
        self.engine_ids: list[str] = []
        self.t_start = time.monotonic()
        self.t_dispatch: float | None = None
        self.t_first_token: float | None = None
        self.t_end: float | None = None
        self._response: aiohttp.ClientResponse | None = None
        self._cut = False
        self.engine_url: str | None = None  # the engine streaming this call now

    # -- control ----------------------------------------------------------------------------------------
    def cut(self) -> None:
        """Called by a pause: close the upstream stream now; the tokens received so far are kept."""
        self._cut = True
        if self._response is not None:
            self._response.close()

    # -- the loop ---------------------------------------------------------------------------------------
    async def run(self) -> CallCapture:
        failures: list[str] = []
        excluded: set[str] = set()
        while not self.capture.finished:
            await self.gate.wait_open(self.options.pause_timeout_s)
            engine = (self.engines.pick(self.session_id, frozenset(excluded), self.profile)
                      or self.engines.pick(self.session_id, profile=self.profile))
            if engine is None and (self._any_tokens() or self.engines.any_held):
                engine = await self._wait_for_engine()  # cut off, or its engine is taking weights: wait
            if engine is None:
                raise ProxyError(503, "no healthy inference engine is available",
                                 retry_after=self.options.retry_after_s)
            if self.t_dispatch is None:
                self.t_dispatch = time.monotonic()
            outcome = await self._run_on(engine)
            if outcome in ("done", "cut"):
                continue
            failures.append(outcome)
            excluded.add(engine.url)
            if len(failures) >= self.options.max_attempts:
                raise _final_error(failures)
        self.t_end = time.monotonic()
        return self.capture

    async def _wait_for_engine(self) -> Engine | None:
        deadline = time.monotonic() + self.options.pause_timeout_s
        while time.monotonic() < deadline:
            await asyncio.sleep(0.2)
            engine = self.engines.pick(self.session_id, profile=self.profile)
            if engine is not None:
                return engine
        return None

    async def _run_on(self, engine: Engine) -> str:
        """Runs what is left of the call on one engine: "done", "cut", or a failure kind."""
        if not self._any_tokens():
            return await self._stream(
                engine, self.request.kind, self.request.upstream_body(self.upstream_model), None
            )
        self._fill_prompt_ids()
        for choice in self.capture.choices:
            if choice.finished:
                continue
            body = self._continuation_body(choice)
            if body is None:
                choice.finish_reason = "length"
                continue
            self.on_continuation()
            outcome = await self._stream(engine, "completions", body, choice.index)
            if outcome != "done":
                return outcome
            if not choice.finished:  # the engine ended the stream without a finish reason
                return "failed"
        return "done"

    async def _stream(self, engine: Engine, kind: str, body: dict, choice_index: int | None) -> str:
        if self.gate.paused or engine.held:  # paused, or the engine is taking weights: dispatch nothing now
            return "cut"
        self._cut = False
        self.engine_url = engine.url
        self.gate.enter(self)
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=self.options.connect_timeout_s, sock_read=self.options.read_timeout_s
        )
        try:
            async with self.http.post(engine.url + PATHS[kind], data=orjson.dumps(body), headers=JSON_BODY,
                                      timeout=timeout) as response:
                self._response = response
                if self._cut:
                    return "cut"
                if response.status != 200:
                    return await self._upstream_status(engine, response)
                await self._read_events(engine, kind, response, choice_index)
            return "cut" if self._cut else "done"
        except ClientGone:
            raise
        except (TimeoutError, aiohttp.ClientError, ConnectionError) as exc:
            if self._cut:
                return "cut"
            if isinstance(exc, (asyncio.TimeoutError, aiohttp.ServerTimeoutError)):
                return "timeout"
            if isinstance(exc, aiohttp.ClientConnectorError):
                self.engines.mark_down(engine)
                return "unreachable"
            return "dropped"  # the stream broke mid-way: continue from the tokens kept
        except UpstreamFormatError:
            return "bad_stream"
        finally:
            self._response = None
            self.engine_url = None
            self.gate.leave(self)

    async def _read_events(
        self, engine: Engine, kind: str, response: aiohttp.ClientResponse, choice_index: int | None
    ) -> None:
        """Absorbs the events of each network read, then shows the agent what they hold in one write: under load
        a read holds several events, and one write (one send) per event was a visible share of a call's CPU."""
        splitter = SSESplitter()
        async for piece in response.content.iter_any():
            if await self._take_read(engine, kind, splitter.feed(piece), choice_index):
                if not self._cut and not response.content.at_eof():
                    await _read_to_end(response)
                return
        await self._take_read(engine, kind, splitter.close(), choice_index)

    async def _take_read(self, engine: Engine, kind: str, events: list[bytes], choice_index: int | None) -> bool:
        """One network read's events absorbed and shown to the agent in one write; True at the stream's end or a
        cut."""
        shown: list[dict] = []
        ended = self._absorb_all(engine, kind, events, choice_index, shown)
        if shown and self.emit is not None:
            await self.emit(shown)
        return ended

    def _absorb_all(
        self, engine: Engine, kind: str, events: list[bytes], choice_index: int | None, shown: list[dict]
    ) -> bool:
        """Absorbs `events` in order (their chunks for the agent go to `shown`); True at the stream's end or a cut."""
        for data in events:
            if self._cut or data == b"[DONE]":
                return True
            self._on_event(engine, kind, data, choice_index, shown)
        return False

    def _on_event(self, engine: Engine, kind: str, data: bytes, choice_index: int | None, shown: list[dict]) -> None:
        try:
            chunk = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise UpstreamFormatError(f"engine sent a line that is not JSON: {data[:80]!r}") from exc
        head, pieces = read_chunk(chunk, kind)
        if choice_index is None:
            self.capture.absorb_head(head)
        version = engine.version_of(self.adapter)  # an adapter's call: that adapter's version on this engine
        for piece in pieces:
            if choice_index is not None:
                piece.index, piece.prompt_ids = choice_index, None
            if piece.token_ids and self.t_first_token is None:
                self.t_first_token = time.monotonic()
            if piece.token_ids and engine.id not in self.engine_ids:
                self.engine_ids.append(engine.id)  # engines that generated tokens, in order
            self.capture.choice(piece.index).absorb(piece, version)
        if self.emit is not None:
            chunk_shown = self.shaper.chunk(pieces, kind)
            if chunk_shown is not None:
                shown.append(chunk_shown)

    async def _upstream_status(self, engine: Engine, response: aiohttp.ClientResponse) -> str:
        text = await response.text()
        if response.status >= 500:
            return "engine_error"
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if not isinstance(body, dict) or "error" not in body:
            body = {
                "error": {
                    "message": text[:2000] or response.reason,
                    "type": "invalid_request_error",
                    "param": None,
                    "code": response.status,
                }
            }
        raise UpstreamRejected(response.status, explain_window(body))

    # -- continuation helpers ---------------------------------------------------------------------------
    def _any_tokens(self) -> bool:
        return any(c.completion_ids or c.finished for c in self.capture.choices)

    def _fill_prompt_ids(self) -> None:
        n = self.request.n
        for choice in self.capture.choices:
            if not choice.prompt_ids:
                sibling = next(
                    (c for c in self.capture.choices if c.index // n == choice.index // n and c.prompt_ids), None
                )
                if sibling is None:
                    raise ProxyError(
                        503, "a paused call could not be continued (prompt ids unknown); retry", retry_after=1
                    )
                choice.prompt_ids = list(sibling.prompt_ids)

    def _continuation_body(self, choice: ChoiceCapture) -> dict | None:
        request = self.request
        generated = len(choice.completion_ids)
        body = upstream_sampling({k: request.body[k] for k in SAMPLING_KEYS if k in request.body}, request.sampled)
        if request.max_tokens is not None:
            if request.max_tokens - generated <= 0:
                return None
            body["max_tokens"] = request.max_tokens - generated
        min_tokens = request.body.get("min_tokens")
        if isinstance(min_tokens, int) and not isinstance(min_tokens, bool):
            body["min_tokens"] = max(0, min_tokens - generated)
        top = request.body.get("top_logprobs") if request.kind == "chat" else request.body.get("logprobs")
        body.update(
            model=self.upstream_model or request.model,
            prompt=choice.prompt_ids + choice.completion_ids,
            n=1,
            stream=True,
            return_token_ids=True,
            logprobs=max(1, top if isinstance(top, int) and not isinstance(top, bool) else 0),
        )
        return body

    # -- figures for the event --------------------------------------------------------------------------
    def timings_ms(self) -> tuple[float, float, float]:
        end = self.t_end or time.monotonic()
        dispatch = self.t_dispatch or end
        first = self.t_first_token or end
        return (dispatch - self.t_start) * 1000, (first - self.t_start) * 1000, (end - self.t_start) * 1000


class Generation:
    """The generation layer: a call run on the engines (routing, pause and continue, the engine client), then
    handed to recording. It owns the HTTP client every request to an engine goes through."""

    def __init__(self, options: ProxyOptions, engines: EngineTable, gate: PauseGate, metrics: ProxyMetrics,
                 recorder: Recorder):
        self.options, self.engines, self.gate, self.metrics, self.recorder = options, engines, gate, metrics, recorder
        self.http: aiohttp.ClientSession | None = None

    def open(self) -> None:
        self.http = aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, ttl_dns_cache=300),
                                          auto_decompress=False)

    async def close(self) -> None:
        if self.http is not None:
            await self.http.close()

    async def serve(self, call: Call) -> None:
        """Runs the call (its chunks to its door as they come, where it streams), then records it."""
        who, request = call.who, call.request
        assert self.http is not None and who is not None  # opened before the app serves; settled by the gate
        adapter = self.options.adapter_of(who.team)
        run = CallRun(request, who.session_id, self.http, self.engines, self.gate, self.options,
                      shaper_id=f"{'chatcmpl' if request.kind == 'chat' else 'cmpl'}-{call.reply.reply_id}",
                      on_continuation=self.metrics.continuations.inc, profile=call.profile, adapter=adapter)
        call.capture = run.capture
        run.emit = call.reply.open(run.shaper, who.session_id)
        capture = await run.run()
        await self.recorder.record(CallResult(who, capture, tuple(run.engine_ids), run.timings_ms(), adapter,
                                              request.sampled))
        call.recorded = True

    async def models(self, session_id: str) -> tuple[int, object]:
        """The models an engine of the session lists (`GET /v1/models`): its status and body."""
        engine = self.engines.pick(session_id)
        if engine is None:
            raise ProxyError(503, "no healthy inference engine is available", retry_after=self.options.retry_after_s)
        assert self.http is not None  # opened before the app serves
        try:
            async with self.http.get(engine.url + "/v1/models", timeout=aiohttp.ClientTimeout(total=10)) as response:
                return response.status, await response.json(content_type=None)
        except (TimeoutError, aiohttp.ClientError, ValueError):
            raise ProxyError(502, "the inference engine did not list its models") from None

    async def healthy(self, url: str, timeout: aiohttp.ClientTimeout) -> bool:
        """Whether the engine at `url` answers its health check."""
        assert self.http is not None  # the health loop starts once the server is up
        try:
            async with self.http.get(url + "/health", timeout=timeout) as response:
                return response.status == 200
        except (TimeoutError, aiohttp.ClientError, ConnectionError):
            return False


async def _read_to_end(response: aiohttp.ClientResponse) -> None:
    """The rest of a stream after `[DONE]` (its last chunk may come in a read of its own). aiohttp closes a
    connection released mid-body, and a new connection a call took 12% of the proxy's CPU in one profile. An
    engine that does not end the body soon costs its connection, never the call: its tokens are all in."""
    try:
        async with asyncio.timeout(END_OF_BODY_S):
            await response.content.read()
    except (TimeoutError, aiohttp.ClientError, ConnectionError):
        pass


def _final_error(failures: list[str]) -> ProxyError:
    last = failures[-1]
    if last == "timeout":
        return ProxyError(504, "the inference engine did not answer in time")
    if last == "unreachable":
        return ProxyError(503, "no inference engine could be reached", retry_after=1)
    return ProxyError(502, f"the inference engine failed ({', '.join(failures)})")

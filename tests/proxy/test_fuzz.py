"""The proxy's HTTP surface under generated and malformed requests, in front of a StubEngine (named stub).

Proves: no 5xx and no crash; every 4xx is JSON in its API's shape (OpenAI's, or Anthropic's on /v1/messages) with a
message; nothing is published on the
session-events topic for a rejected call (read back after the fuzzing and counted per session against
the calls that were accepted); oversized bodies get 413; session-id abuse gets 4xx.
"""

from __future__ import annotations

import asyncio
import collections
import json
import threading
import time

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, given
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.config import SchemathesisConfig
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    negative_data_rejection,
    response_schema_conformance,
    status_code_conformance,
)

from seamlessflow.kafka.io import read_messages
from seamlessflow.loadtest.stub_engine import StubBehaviour, StubEngine
from seamlessflow.messages import EpisodeEnd, TokenIO
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.proxy.openapi import openapi_document
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.proxy_harness import KEYS
from seamlessflow.topics import Topics

MAX_BODY = 64 * 1024
CONFIG = dict(port=0, max_n=4, max_body_bytes=MAX_BODY, listen_control=False, discover_engines=False)
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance,
          negative_data_rejection]
AUTH = st.sampled_from(["Bearer key-alpha", "Bearer key-alpha", "Bearer key-beta", "Bearer nope", None])


class ThreadedProxy:
    """A StubEngine and a proxy on their own event loop, so a synchronous hypothesis test can call them."""

    def __init__(self, settings, tmp_path):
        self.settings, self.tmp_path = settings, tmp_path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        self.engine = self._run(StubEngine(StubBehaviour(max_tokens_cap=4)).start())
        config = ProxyOptions(engines=[{"id": "e0", "url": self.engine.url}], **CONFIG)
        self.proxy = self._run(
            ProxyService(self.settings, config, team_keys=TeamKeys(self.tmp_path / "t.json", KEYS)).start()
        )
        self.root = self.proxy.base_url.removesuffix("/v1")
        return self

    def __exit__(self, *exc):
        self._run(self.proxy.stop())
        self._run(self.engine.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)


class Ledger:
    """What the proxy accepted, per session: calls answered 200 and episode ends answered 200."""

    def __init__(self):
        self.calls: collections.Counter[str] = collections.Counter()
        self.ends: collections.Counter[str] = collections.Counter()
        self.statuses: collections.Counter[int] = collections.Counter()

    def note(self, method: str, path: str, response) -> None:
        headers = {k.lower(): v[0] if isinstance(v, list) else v for k, v in response.headers.items()}
        self.statuses[response.status_code] += 1
        if response.status_code >= 400:
            body = response.json()  # every refusal is JSON in OpenAI's shape with a message
            assert body["error"]["message"], body
            return
        if method != "POST":
            return
        if path.endswith("/end"):
            self.ends[response.json()["session_id"]] += 1
            return
        if path.endswith("/reward"):  # a call's reward is kept until its session's end: nothing published
            return
        if "/v1/conversations" in path:  # a conversation's items: on the conversations topic, not a call
            return
        if headers.get("content-type", "").startswith("text/event-stream"):
            assert stream_ended_well(path, response.text), response.text[-300:]
        self.calls[headers["x-session-id"]] += 1

    def assert_matches(self, settings, codec) -> None:
        """One TokenIO with choice 0 per accepted call, one EpisodeEnd per accepted end, nothing else."""
        calls, ends = collections.Counter(), collections.Counter()
        for message in read_messages(settings, Topics(settings).session_events, codec):
            if isinstance(message, TokenIO) and message.choice_index == 0:
                calls[message.session_id] += 1
            elif isinstance(message, EpisodeEnd):
                ends[message.session_id] += 1
        assert calls == self.calls
        assert ends == self.ends


def stream_ended_well(path: str, text: str) -> bool:
    """A stream that ended as its API ends a success: [DONE], response.completed (or .incomplete), message_stop."""
    if path.endswith("/completions"):
        return text.rstrip().endswith("data: [DONE]")
    last = [line for line in text.splitlines() if line.startswith("event: ")][-1]
    return last in ("event: response.completed", "event: response.incomplete", "event: message_stop")


@pytest.fixture
def threaded_proxy(settings, tmp_path):
    with ThreadedProxy(settings, tmp_path) as running:
        yield running


def _headers(auth: str | None) -> dict:
    return {"Authorization": auth} if auth else {}


def test_every_operation_fuzzed_from_the_openapi_document(threaded_proxy, settings, codec):
    """Each operation gets its own share of examples, so none is left out by chance (a union of all of them
    once drew no `GET /metrics` in 300)."""
    config = SchemathesisConfig.from_dict({"generation": {"with-security-parameters": False}})  # keys: AUTH below
    schema = schemathesis.openapi.from_dict(openapi_document(threaded_proxy.proxy.options), config=config)
    operations = [op.ok() for op in schema.get_all_operations()]
    ledger = Ledger()
    seen = set()

    def check(case, auth):
        response = case.call(base_url=threaded_proxy.root, headers=_headers(auth), timeout=30)
        seen.add(case.operation.label)
        if response.status_code != 401:  # an unauthenticated call is refused before its body is read
            case.validate_response(response, checks=CHECKS)
        ledger.note(case.method, case.formatted_path, response)

    started = time.monotonic()
    for operation in operations:
        cases = operation.as_strategy(GenerationMode.POSITIVE) | operation.as_strategy(GenerationMode.NEGATIVE)
        share = hsettings(max_examples=300 // len(operations), deadline=None,
                          suppress_health_check=list(HealthCheck), database=None)
        share(given(case=cases, auth=AUTH)(check))()
    print(f"{sum(ledger.statuses.values())} calls in {time.monotonic() - started:.1f} s: {dict(ledger.statuses)}")
    assert seen == {op.label for op in operations}
    assert ledger.statuses[200] > 20 and sum(n for s, n in ledger.statuses.items() if 400 <= s < 500) > 20, (
        ledger.statuses
    )
    assert httpx.get(threaded_proxy.root + "/healthz").status_code == 200  # still serving
    ledger.assert_matches(settings, codec)


scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=12)
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12,
)
FIELDS = [
    "n",
    "stream",
    "stream_options",
    "max_tokens",
    "logprobs",
    "top_logprobs",
    "return_token_ids",
    "tools",
    "echo",
    "stop",
]
message = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool"]), "content": st.text(max_size=20) | values}
)
plausible = st.fixed_dictionaries({}, optional={
    "model": st.text(max_size=8) | values,
    "messages": st.lists(message, max_size=3) | values,
    "prompt": st.text(max_size=10) | st.lists(st.integers(-5, 300), max_size=5) | values,
    "reward": st.floats() | values,
    **{name: values | st.integers(-3, 5) | st.booleans() for name in FIELDS},
})


def test_malformed_bytes_get_a_json_4xx_and_publish_nothing(threaded_proxy, settings, codec):
    """Bodies schemathesis does not make: truncated JSON, NaN, deep nesting, non-UTF-8 bytes."""
    root = threaded_proxy.root
    paths = ["/v1/chat/completions", "/v1/completions", "/sessions/fz/v1/chat/completions", "/sessions/fz/end",
             "/v1/responses", "/sessions/fz/v1/messages"]
    ledger = Ledger()
    raw = (plausible | values).map(lambda b: json.dumps(b).encode())
    mangled = (
        raw.flatmap(lambda d: st.sampled_from([d, d[: max(1, len(d) // 2)], d.replace(b"1", b"NaN", 1)]))
        | st.binary(max_size=64)
        | st.integers(1, 5000).map(lambda depth: b"[" * depth + b"]" * depth)
    )

    with httpx.Client(timeout=30) as http:
        @hsettings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
        @given(data=mangled, path=st.sampled_from(paths))
        def check(data, path):
            response = http.post(
                root + path,
                content=data,
                headers={"Authorization": "Bearer key-alpha", "Content-Type": "application/json"},
            )
            assert response.status_code < 500, (data[:200], response.text)
            ledger.note("POST", path, response)

        check()
    ledger.assert_matches(settings, codec)


def test_oversized_bodies_get_413_with_or_without_a_length(threaded_proxy, settings, codec):
    big = json.dumps({"messages": [{"role": "user", "content": "x" * MAX_BODY}]}).encode()
    url = threaded_proxy.root + "/sessions/big/v1/chat/completions"
    auth = {"Authorization": "Bearer key-alpha"}
    with httpx.Client(timeout=30) as http:
        sized = http.post(url, content=big, headers=auth)
        chunked = http.post(url, content=iter([big[:1000], big[1000:]]), headers=auth)  # no Content-Length
        ended = http.post(threaded_proxy.root + "/sessions/big/end", content=big, headers=auth)
        small = http.post(url, json={"messages": [{"role": "user", "content": "hi"}]}, headers=auth)
    for response in (sized, chunked, ended):
        assert response.status_code == 413 and "bytes" in response.json()["error"]["message"]
    assert small.status_code == 200
    ledger = Ledger()
    ledger.calls["big"] = 1  # only the small call
    ledger.assert_matches(settings, codec)


def test_session_id_abuse_gets_4xx_and_publishes_nothing(threaded_proxy, settings, codec):
    root = threaded_proxy.root
    chat = {"messages": [{"role": "user", "content": "hi"}]}
    alpha, beta = {"Authorization": "Bearer key-alpha"}, {"Authorization": "Bearer key-beta"}
    with httpx.Client(timeout=30) as http:
        assert http.post(root + "/sessions/owned/v1/chat/completions", json=chat, headers=alpha).status_code == 200
        refused = {
            "other team's call": http.post(root + "/sessions/owned/v1/chat/completions", json=chat, headers=beta),
            "other team's end": http.post(root + "/sessions/owned/end", json={"reward": 1}, headers=beta),
            "other team's header": http.post(
                root + "/v1/chat/completions", json=chat, headers={**beta, "X-Session-Id": "owned"}
            ),
            "bad characters": http.post(root + "/sessions/a%20b/v1/chat/completions", json=chat, headers=alpha),
            "bad header": http.post(
                root + "/v1/completions", json={"prompt": "x"}, headers={**alpha, "X-Session-Id": "a/b"}
            ),
            "129 characters": http.post(root + f"/sessions/{'s' * 129}/end", json={"reward": 1}, headers=alpha),
            "4 KiB": http.post(root + f"/sessions/{'s' * 4096}/v1/chat/completions", json=chat, headers=alpha),
            "empty": http.post(root + "/sessions//end", json={"reward": 1}, headers=alpha),
        }
        huge = http.post(root + f"/sessions/{'s' * 20000}/v1/chat/completions", json=chat, headers=alpha)
    for what, response in refused.items():
        assert 400 <= response.status_code < 500, what
        assert response.json()["error"]["message"], what
    assert refused["other team's call"].status_code == 403 and refused["bad characters"].status_code == 400
    # over aiohttp's request-line limit (8190 bytes) the HTTP parser refuses it before any handler runs
    assert huge.status_code == 400
    ledger = Ledger()
    ledger.calls["owned"] = 1
    ledger.assert_matches(settings, codec)

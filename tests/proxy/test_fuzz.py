"""Fuzzed request bodies (hypothesis) never make the proxy answer 5xx; it runs in a thread in front of a StubEngine."""

from __future__ import annotations

import asyncio
import json
import threading

import httpx
import pytest
from hypothesis import HealthCheck, given, settings as hsettings, strategies as st

from seamlessflow.proxy import ProxyConfig, ProxyService
from seamlessflow.teams import TeamKeys
from tests.proxy.conftest import KEYS
from tests.proxy.stub_engine import StubBehaviour, StubEngine

FIELDS = ["model", "messages", "prompt", "n", "stream", "stream_options", "max_tokens", "max_completion_tokens", "logprobs",
          "top_logprobs", "return_token_ids", "tools", "tool_choice", "temperature", "echo", "min_tokens", "stop", "seed"]
scalars = st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=False) | st.text(max_size=12)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4), max_leaves=12)
message = st.fixed_dictionaries({"role": st.sampled_from(["user", "assistant", "system", "tool"]), "content": st.text(max_size=20) | values})
plausible = st.fixed_dictionaries(
    {},
    optional={
        "model": st.text(max_size=8) | values,
        "messages": st.lists(message, max_size=3) | values,
        "prompt": st.text(max_size=10) | st.lists(st.integers(-5, 300), max_size=5) | values,
        **{name: values | st.integers(-3, 5) | st.booleans() for name in FIELDS[3:]},
    },
)
bodies = plausible | values


class ThreadedProxy:
    """A StubEngine and a proxy on their own event loop, so a synchronous hypothesis test can call them."""

    def __init__(self, settings, tmp_path):
        self.settings, self.tmp_path = settings, tmp_path
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        self.engine = self._run(StubEngine(StubBehaviour(max_tokens_cap=4)).start())
        config = ProxyConfig(port=0, engines=[{"id": "e0", "url": self.engine.url}], max_n=4, listen_control=False, discover_engines=False)
        self.proxy = self._run(ProxyService(self.settings, config=config, team_keys=TeamKeys(self.tmp_path / "t.json", KEYS)).start())
        return self

    def __exit__(self, *exc):
        self._run(self.proxy.stop())
        self._run(self.engine.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    def _run(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(60)


@pytest.fixture
def threaded_proxy(settings, tmp_path):
    with ThreadedProxy(settings, tmp_path) as running:
        yield running


def test_fuzzed_bodies_never_get_5xx(threaded_proxy):
    base = threaded_proxy.proxy.base_url
    end_url = threaded_proxy.proxy.session_url("fz").removesuffix("/v1") + "/end"
    headers = {"Authorization": "Bearer key-alpha", "Content-Type": "application/json"}

    with httpx.Client(timeout=30) as http:

        @hsettings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
        @given(body=bodies, path=st.sampled_from(["/chat/completions", "/completions", "end"]), raw=st.booleans())
        def check(body, path, raw):
            data = json.dumps(body).encode()
            if raw:
                data = data[: max(1, len(data) // 2)]  # truncated JSON
            url = end_url if path == "end" else base + path
            response = http.post(url, content=data, headers=headers)
            assert response.status_code < 500, (body, response.text)
            if response.status_code >= 400:
                assert "message" in response.json()["error"]

        check()

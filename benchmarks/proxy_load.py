"""The proxy benchmarks' shared load: the three front doors' bodies, sessions calling in a loop, the gateway
processes started and stopped, percentiles and CPU per call (`bench_proxy.py`, its `--peers` and
`--continuation` modes, `bench_quotas.py` and `bench_long_sessions.py` use it)."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seamlessflow.config import Settings  # noqa: E402
from seamlessflow.ports import free_port  # noqa: E402

KEY = "bench-key"
HELLO = [{"role": "user", "content": "hello"}]
ROUTES = {  # front door: (path, body for `tokens` tokens, streamed or not)
    "chat": (
        "/v1/chat/completions",
        lambda tokens, stream: {"model": "stub-model", "messages": HELLO, "max_tokens": tokens, "stream": stream},
    ),
    "responses": (
        "/v1/responses",
        lambda tokens, stream: {"model": "stub-model", "input": "hello", "max_output_tokens": tokens, "stream": stream},
    ),
    "messages": (
        "/v1/messages",
        lambda tokens, stream: {"model": "stub-model", "messages": HELLO, "max_tokens": tokens, "stream": stream},
    ),
}


def wait_http(url: str, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=1):
                return
        except OSError:
            time.sleep(0.1)
    raise TimeoutError(url)


def start(argv: list[str], log: Path, env: dict[str, str] | None = None, cwd: Path = ROOT) -> subprocess.Popen:
    out = open(log, "ab")
    environ = {k: v for k, v in os.environ.items() if cwd == ROOT or k != "PYTHONPATH"}
    return subprocess.Popen(argv, stdout=out, stderr=out, env={**environ, **(env or {})}, cwd=cwd)


async def session_loop(
    http: aiohttp.ClientSession, url: str, headers: dict[str, str], body: dict, until: float,
    latencies: list[float], first: list[float] | None = None, failures: list[int] | None = None,
) -> None:
    """Calls in a loop until `until`; `first` collects each stream's time to its first token, `failures` the
    status of each refused call, 0 for one that got no answer (without it a refusal ends the run)."""
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            async with http.post(url, json=body, headers=headers) as response:
                if first is not None and response.status == 200:
                    await first_token(response, started, first)
                await response.read()
                if response.status != 200:
                    if failures is None:
                        raise RuntimeError(f"{url}: {response.status} {await response.text()}")
                    failures.append(response.status)
                    continue
        except (aiohttp.ClientError, TimeoutError):
            if failures is None:
                raise
            failures.append(0)  # no answer: a dropped connection or the client's timeout
            continue
        latencies.append(time.perf_counter() - started)


FIRST_TOKEN = re.compile(rb'"(?:content|delta|text)":\s*"t\d')  # the StubEngine's tokens read "t<id> "


async def first_token(response: aiohttp.ClientResponse, started: float, first: list[float]) -> None:
    """Reads the stream up to its first token's text (chat, completions or Responses events alike)."""
    seen = b""
    while chunk := await response.content.readany():
        seen = seen[-64:] + chunk
        if FIRST_TOKEN.search(seen):
            first.append(time.perf_counter() - started)
            return


def cpu_seconds(procs: list[subprocess.Popen]) -> float:
    """User + system CPU the processes have used so far (the proxy's per-call cost, whatever the wall clock)."""
    times = [psutil.Process(p.pid).cpu_times() for p in procs]
    return sum(t.user + t.system for t in times)


async def run_level(
    url_for: Callable[..., str], sessions: int, seconds: float, tokens: int, stream: bool,
    cpu: Callable[[], float] = lambda: 0.0, route: str = "chat", first: list[float] | None = None,
    failures: list[int] | None = None, key: str = KEY,
) -> tuple[list[float], float, float]:
    """Latencies and calls/s of the measured window, and the CPU seconds `cpu` counted during it (`first` and
    `failures` as in `session_loop`, for the measured window)."""
    connector = aiohttp.TCPConnector(limit=0)
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(connector=connector) as http:
        body = ROUTES[route][1](tokens, stream)
        warm_until = time.monotonic() + 1.0
        await asyncio.gather(
            *(session_loop(http, url_for(i), headers, body, warm_until, [], None, []) for i in range(sessions))
        )
        latencies: list[float] = []
        cpu_before, started = cpu(), time.monotonic()
        until = started + seconds
        await asyncio.gather(
            *(
                session_loop(http, url_for(i), headers, body, until, latencies, first, failures)
                for i in range(sessions)
            )
        )
        return latencies, len(latencies) / (time.monotonic() - started), cpu() - cpu_before


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def stop(procs: list[subprocess.Popen]) -> None:
    for proc in procs:
        proc.terminate()
    for proc in procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()


def start_proxies(
    client: Settings, engine: str, count: int, work: Path, tree: Path = ROOT, **options: Any
) -> tuple[list[subprocess.Popen], str]:
    """`count` proxy processes on one port, as `up` starts them for `proxy.workers: count` (from `tree`), with
    further `proxy` config `options`."""
    port = free_port()
    config = {
        **client.model_dump(mode="json"),
        "proxy": {"port": port, "workers": count, "engines": [{"id": "stub", "url": engine}], **options},
    }
    config_path = work / f"config-{count}-{port}.yaml"
    config_path.write_text(yaml.safe_dump(config))
    worker_args = [[]] if count == 1 else [["--worker", str(i)] for i in range(count)]
    procs = [
        start(
            [sys.executable, "-m", "services.proxy", "--config", str(config_path), *extra],
            work / f"proxy-{port}-{i}.log",
            cwd=tree,
        )
        for i, extra in enumerate(worker_args)
    ]
    time.sleep(0.5 * count)  # every worker bound before traffic, or the kernel sends it all to the first
    wait_http(f"http://127.0.0.1:{port}/healthz")
    return procs, f"http://127.0.0.1:{port}"

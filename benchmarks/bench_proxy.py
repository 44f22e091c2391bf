"""Proxy overhead: the same load straight to an engine vs through the proxy, side by side in one run.

The engine is the StubEngine (a fake that sleeps per token; named as such, not a real engine) in its
own process; the proxy runs as its own process (`python -m services.proxy`) publishing to the embedded
broker (Apache Kafka, one KRaft node). Each level runs N concurrent sessions, each sending non-streaming chat calls
in a loop for a fixed time (127.0.0.1 only, bounded). Reported: latency p50/p99 direct vs proxied, the
added latency, the throughput ratio, and the proxy processes' CPU per proxied call. `--proxies 1,2` repeats
the comparison with that many proxy processes on one port (`proxy.workers`); `--baseline TREE` also runs
another source tree's proxy (say `git archive <commit>` unpacked) at every level, right after this one's.
Targets: added p50 <= 1 ms, p99 <= 5 ms, throughput >= 0.95x (>= 0.9x with N proxies). `--routes
chat,responses,messages` runs the same load through each front door (the proxy turns a Responses or Messages
call into the engine's chat call, so the direct column is the engine's chat route for all three). `--peers` puts the
same load through SeamlessFlow's proxy and the peer gateways (LiteLLM's proxy, Agent Lightning's server) in one
table, with time to the first token and what each records of a call (`benchmarks/proxy_peers.py`). `--continuation`
runs multi-turn Responses conversations (`--turns`) two ways, alternating, through one proxy: the whole conversation
as `input` every turn (`store: false`) vs only the new message with `previous_response_id` (stored responses on
Kafka); per way turn latency p50/p99, turns/s, the proxy's CPU per turn, and continuation/whole
(`benchmarks/proxy_continuation.py`).

    .venv/bin/python benchmarks/bench_proxy.py [--levels 1,50,200] [--seconds 8] [--tokens 16]
        [--token-delay-ms 20] [--proxies 1,2] [--baseline TREE] [--routes chat,responses,messages]
    .venv/bin/python benchmarks/bench_proxy.py --peers [--gateways seamlessflow,litellm,agentlightning] [--no-install]
    .venv/bin/python benchmarks/bench_proxy.py --continuation [--turns 8] [--turn-bytes 200] [--rounds 2]
        [--levels 1,50,200] [--seconds 8] [--tokens 16]
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import re
import subprocess
import sys
import tempfile
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

from benchmarks import proxy_continuation, proxy_peers  # noqa: E402
from seamlessflow.broker.local import LocalBroker  # noqa: E402
from seamlessflow.config import Settings  # noqa: E402
from seamlessflow.kafka.admin import ensure_topics  # noqa: E402
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--levels", help="concurrent sessions per level (default 1,50,200; with --peers 20,200,1000)")
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--token-delay-ms", type=float, default=20)
    parser.add_argument(
        "--modes",
        default="stream,plain",
        help="stream: SSE calls both ways (same engine work); plain: non-streaming (the proxy still streams "
        "from the engine)",
    )
    parser.add_argument(
        "--baseline", type=Path, help="another source tree whose proxy runs the same levels, after this one's"
    )
    parser.add_argument(
        "--routes", help="front doors to measure: chat,responses,messages (default chat; with --peers chat,responses)"
    )
    parser.add_argument(
        "--proxies",
        default="1",
        help="proxy process counts to compare, e.g. 1,2 (proxy.workers: SO_REUSEPORT on one port)",
    )
    proxy_peers.add_arguments(parser)
    proxy_continuation.add_arguments(parser)
    args = parser.parse_args()
    args.levels = args.levels or ("20,200,1000" if args.peers else "1,50,200")
    args.routes = args.routes or ("chat,responses" if args.peers else "chat")

    work = Path(tempfile.mkdtemp(prefix="bench-proxy-"))
    broker = LocalBroker(work / "broker").start()
    procs = []
    try:
        client = broker.client_settings.with_overrides(topic_prefix="bench", team_keys={"bench": KEY})
        ensure_topics(client)
        engine_port = free_port()
        procs.append(
            start(
                [sys.executable, "-m", "seamlessflow.loadtest.stub_engine", str(engine_port), str(args.token_delay_ms)],
                work / "stub.log",
            )
        )
        engine = f"http://127.0.0.1:{engine_port}"
        wait_http(engine + "/health")
        print(
            f"StubEngine (fake): {args.tokens} tokens x {args.token_delay_ms} ms per call; {args.seconds:g} s per "
            f"run; {'responses' if args.continuation else 'chat'}; load average {os.getloadavg()[0]:.1f} on "
            f"{os.cpu_count()} cores"
        )
        if args.peers:
            proxy_peers.run(args, client, engine, work, list(broker.procs.values()))
            return
        if args.continuation:
            proxy_continuation.run(args, client, engine, work, list(broker.procs.values()))
            return
        for count in (int(x) for x in args.proxies.split(",")):
            trees = {"this": ROOT, **({"baseline": args.baseline} if args.baseline else {})}
            started = {name: start_proxies(client, engine, count, work, tree) for name, tree in trees.items()}
            for proxies, _url in started.values():
                procs.extend(proxies)
            try:
                print(
                    f"-- {count} proxy process(es) on one port"
                    + (f"; baseline: {args.baseline}" if args.baseline else "")
                )
                compare(args, engine, started, count)
            finally:
                for proxies, _url in started.values():
                    stop(proxies)
                    procs[:] = [p for p in procs if p not in proxies]
        print(f"targets: added p50 <= 1 ms, added p99 <= 5 ms, ratio >= 0.95   (logs in {work})")
    finally:
        broker.stop()
        stop(list(reversed(procs)))


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


def compare(
    args: argparse.Namespace, engine: str, started: dict[str, tuple[list[subprocess.Popen], str]], count: int
) -> None:
    """Per mode and level: direct, then each tree's proxies (this one first), one after the other."""
    print(
        f"{'mode':>6} {'sessions':>8} {'tree':>8} {'route':>9} {'direct p50':>11} {'proxy p50':>10} {'added p50':>10} "
        f"{'direct p99':>11} {'proxy p99':>10} {'added p99':>10} {'direct rps':>11} {'proxy rps':>10} {'ratio':>6} "
        f"{'proxy CPU/call':>15}"
    )
    for mode in args.modes.split(","):
        for level in (int(x) for x in args.levels.split(",")):
            stream = mode == "stream"
            direct, direct_rps, _ = asyncio.run(
                run_level(lambda i: engine + "/v1/chat/completions", level, args.seconds, args.tokens, stream)
            )
            d50, d99 = pct(direct, 0.5), pct(direct, 0.99)
            for (name, (proxies, proxy)), route in (
                (tree, r) for tree in started.items() for r in args.routes.split(",")
            ):
                path = ROUTES[route][0]
                url = lambda i, mode=mode, level=level, name=name, proxy=proxy, route=route, path=path: (  # noqa: E731
                    f"{proxy}/sessions/bench-{count}-{name}-{route}-{mode}-{level}-{i}{path}"
                )
                proxied, proxy_rps, cpu = asyncio.run(
                    run_level(
                        url,
                        level,
                        args.seconds,
                        args.tokens,
                        stream,
                        functools.partial(cpu_seconds, proxies),
                        route,
                    )
                )
                p50, p99 = pct(proxied, 0.5), pct(proxied, 0.99)
                per_call_us = cpu / max(1, len(proxied)) * 1e6
                print(
                    f"{mode:>6} {level:>8} {name:>8} {route:>9} {d50:>9.2f}ms {p50:>8.2f}ms {p50 - d50:>8.2f}ms "
                    f"{d99:>9.2f}ms {p99:>8.2f}ms {p99 - d99:>8.2f}ms {direct_rps:>11.1f} {proxy_rps:>10.1f} "
                    f"{proxy_rps / direct_rps:>6.3f} {per_call_us:>12.0f} us",
                    flush=True,
                )


if __name__ == "__main__":
    main()

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
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks import proxy_continuation, proxy_peers  # noqa: E402
from benchmarks.proxy_load import KEY, ROUTES, cpu_seconds, pct, run_level, start, start_proxies, stop, wait_http  # noqa: E402
from seamlessflow.broker.local import LocalBroker  # noqa: E402
from seamlessflow.kafka.admin import ensure_topics  # noqa: E402
from seamlessflow.ports import free_port  # noqa: E402


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

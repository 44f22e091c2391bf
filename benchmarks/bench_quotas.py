"""Fair shares at the proxy: a team over its quota gets 429s while another team's latency stays where it was.

One proxy process (`python -m services.proxy`, publishing to the embedded broker) in front of the StubEngine (a
fake that sleeps per token; named as such, not a real engine). Two teams with their own keys: `calm` has no quota
and runs `--calm` sessions; `greedy` has `proxy.teams.greedy: {max_sessions, tokens_per_s}` and runs `--greedy`
sessions, many more than its share, each waiting the `Retry-After` it is told (as the `openai` and `anthropic` SDKs
do) before trying again. Three runs side by side, in one process: calm alone; calm beside greedy with the quota;
calm beside greedy without it (the same proxy config less greedy's entry: what the quota protects calm from).
Printed: calm's p50/p99 in each and its ratio to alone, greedy's served calls, 429s and generated tokens/s
against its quota.

    .venv/bin/python benchmarks/bench_quotas.py [--seconds 8] [--calm 20] [--greedy 200] [--max-sessions 4]
        [--tokens-per-s 400] [--tokens 16] [--token-delay-ms 20]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.proxy_load import ROUTES, pct, start, start_proxies, stop, wait_http  # noqa: E402
from seamlessflow.broker.local import LocalBroker  # noqa: E402
from seamlessflow.kafka.admin import ensure_topics  # noqa: E402
from seamlessflow.ports import free_port  # noqa: E402

KEYS = {"calm": "calm-key", "greedy": "greedy-key"}


@dataclass
class TeamRun:
    """What one team's sessions saw in the measured window."""

    latencies: list[float] = field(default_factory=list)
    refused: int = 0  # 429s
    failed: int = 0  # any other answer, or none
    tokens: int = 0


async def session(http: aiohttp.ClientSession, url: str, key: str, tokens: int, until: float, seen: TeamRun,
                  measure_from: float) -> None:
    """Calls in a loop until `until`; a 429 waits its Retry-After (capped by what is left) and tries again."""
    body = ROUTES["chat"][1](tokens, False)
    headers = {"Authorization": f"Bearer {key}"}
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            async with http.post(url, json=body, headers=headers) as response:
                answer = await response.json(content_type=None)
                measured = time.monotonic() >= measure_from
                if response.status == 429:
                    seen.refused += measured
                    wait = float(response.headers.get("Retry-After", "1"))
                    await asyncio.sleep(max(0.0, min(wait, until - time.monotonic())))
                    continue
                if response.status != 200:
                    seen.failed += measured
                    continue
        except (aiohttp.ClientError, TimeoutError):
            seen.failed += 1
            continue
        if measured:
            seen.latencies.append(time.perf_counter() - started)
            seen.tokens += int(answer.get("usage", {}).get("completion_tokens", 0))


async def run(proxy: str, sessions: dict[str, int], seconds: float, tokens: int) -> dict[str, TeamRun]:
    """Every team's sessions at once: one warm-up second, then `seconds` measured."""
    runs = {team: TeamRun() for team in sessions}
    measure_from = time.monotonic() + 1.0
    until = measure_from + seconds
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        await asyncio.gather(*(
            session(http, f"{proxy}/sessions/{team}-{i}-{time.monotonic_ns()}/v1/chat/completions", KEYS[team],
                    tokens, until, runs[team], measure_from)
            for team, count in sessions.items() for i in range(count)))
    return runs


def row(name: str, calm: TeamRun, alone: TeamRun, greedy: TeamRun | None, seconds: float) -> str:
    c50, c99 = pct(calm.latencies, 0.5), pct(calm.latencies, 0.99)
    ratio = f"{c50 / pct(alone.latencies, 0.5):.2f} / {c99 / pct(alone.latencies, 0.99):.2f}"
    greedy_cols = ("-", "-", "-") if greedy is None else (
        f"{len(greedy.latencies)}", f"{greedy.refused}", f"{greedy.tokens / seconds:.0f}")
    return (f"{name:>24} {c50:>9.1f} {c99:>9.1f} {ratio:>13} {len(calm.latencies):>6} {calm.failed:>6} "
            f"{greedy_cols[0]:>7} {greedy_cols[1]:>6} {greedy_cols[2]:>9}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=8)
    parser.add_argument("--calm", type=int, default=20, help="calm's concurrent sessions (no quota)")
    parser.add_argument("--greedy", type=int, default=200, help="greedy's concurrent sessions (over its quota)")
    parser.add_argument("--max-sessions", type=int, default=4, help="greedy's proxy.teams quota: sessions at once")
    parser.add_argument("--tokens-per-s", type=float, default=400, help="greedy's quota: generated tokens/s")
    parser.add_argument("--tokens", type=int, default=16)
    parser.add_argument("--token-delay-ms", type=float, default=20)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bench-quotas-"))
    broker = LocalBroker(work / "broker").start()
    procs = []
    try:
        client = broker.client_settings.with_overrides(topic_prefix="bench", team_keys=KEYS)
        ensure_topics(client)
        port = free_port()
        procs.append(start([sys.executable, "-m", "seamlessflow.loadtest.stub_engine", str(port),
                            str(args.token_delay_ms)], work / "stub.log"))
        engine = f"http://127.0.0.1:{port}"
        wait_http(engine + "/health")
        quota = {"greedy": {"max_sessions": args.max_sessions, "tokens_per_s": args.tokens_per_s}}
        with_quota, proxy = start_proxies(client, engine, 1, work, teams=quota)
        without_quota, open_proxy = start_proxies(client, engine, 1, work)
        procs += with_quota + without_quota
        print(f"StubEngine (fake): {args.tokens} tokens x {args.token_delay_ms:g} ms per call; {args.seconds:g} s "
              f"measured per run; one proxy process; load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} "
              f"cores\ncalm: {args.calm} sessions, no quota; greedy: {args.greedy} sessions, quota "
              f"max_sessions={args.max_sessions}, tokens_per_s={args.tokens_per_s:g} (429s wait their Retry-After)")
        alone = asyncio.run(run(proxy, {"calm": args.calm}, args.seconds, args.tokens))["calm"]
        beside = asyncio.run(run(proxy, {"calm": args.calm, "greedy": args.greedy}, args.seconds, args.tokens))
        unlimited = asyncio.run(run(open_proxy, {"calm": args.calm, "greedy": args.greedy}, args.seconds,
                                    args.tokens))
        print(f"{'run':>24} {'calm p50':>9} {'calm p99':>9} {'÷ alone':>13} {'calls':>6} {'failed':>6} "
              f"{'greedy':>7} {'429s':>6} {'greedy t/s':>9}")
        print(row("calm alone", alone, alone, None, args.seconds))
        print(row("beside greedy, quota", beside["calm"], alone, beside["greedy"], args.seconds))
        print(row("beside greedy, no quota", unlimited["calm"], alone, unlimited["greedy"], args.seconds))
        print(f"(ms; ÷ alone is p50 / p99; greedy t/s: its generated tokens per second, quota {args.tokens_per_s:g}; "
              f"logs in {work})")
    finally:
        stop(list(reversed(procs)))
        broker.stop()


if __name__ == "__main__":
    main()

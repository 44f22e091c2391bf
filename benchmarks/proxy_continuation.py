"""`bench_proxy.py --continuation`: what a Responses continuation (`previous_response_id`) costs against sending the
whole conversation again, side by side through one proxy process in front of the StubEngine (a fake engine).

At each level N concurrent sessions each hold multi-turn Responses conversations of `--turns` turns, one
conversation a session id (a new one for each conversation), non-streaming, two ways:

- **whole**: every turn sends the whole conversation so far as `input` items (the user messages and the
  output items the proxy answered with, as an SDK's `input += response.output`) with `store: false`;
- **continuation**: turn 1 with `store: true`, each later turn only its new user message with the previous
  response's `previous_response_id` (and `store: true`, so the next turn can continue it): the proxy reads the
  stored conversation from its responses topic (Kafka) and stores the new one there before answering.

The engine gets the same prompt either way (checked before the run: the StubEngine's prompt tokens are the
bytes of the messages, so each turn's `usage.input_tokens` must match). The two ways alternate in `--rounds`
windows a level (whole first in the odd rounds, continuation first in the even ones), after a warm-up of each.
Reported per way: per-turn latency p50/p99, turns/s, the proxy process's CPU per turn, the broker's CPU per turn
(beside it: Kafka holds the stored responses) and the bytes the client sent per turn; then continuation/whole.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import orjson

from benchmarks import proxy_load as load
from benchmarks import proxy_peers

WAYS = ("whole", "continuation")
PATH = "/v1/responses"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--continuation", action="store_true",
        help="multi-turn Responses conversations: whole conversation each turn vs previous_response_id",
    )
    parser.add_argument("--turns", type=int, default=8, help="with --continuation: turns a conversation")
    parser.add_argument("--turn-bytes", type=int, default=200, help="with --continuation: a user message's size")
    parser.add_argument("--rounds", type=int, default=2, help="with --continuation: alternating windows a level")


def user_text(conversation: str, turn: int, size: int) -> str:
    """Turn `turn`'s user message, about `size` bytes, unique to its conversation (so no two calls of a session
    share a body: the proxy takes a repeated body in one session for an SDK's retry of the same call)."""
    head = f"[{conversation} turn {turn + 1}] "
    return (head + "lorem ipsum dolor sit amet " * (size // 27 + 1))[: max(size, len(head))]


@dataclass
class Conversation:
    """One conversation's client side: the next turn's body, and what it keeps of each answer."""

    way: str
    tokens: int
    items: list[dict] = field(default_factory=list)  # whole: the conversation so far, as input items
    previous_id: str | None = None  # continuation: the last response's id

    def body(self, text: str) -> dict[str, Any]:
        message = {"role": "user", "content": text}
        body: dict[str, Any] = {"model": "stub-model", "max_output_tokens": self.tokens}
        if self.way == "whole":
            self.items.append(message)
            return {**body, "input": list(self.items), "store": False}
        if self.previous_id is None:
            return {**body, "input": [message], "store": True}
        return {**body, "input": [message], "previous_response_id": self.previous_id, "store": True}

    def absorb(self, response: dict[str, Any]) -> None:
        if self.way == "whole":
            self.items.extend(response["output"])
        else:
            self.previous_id = response["id"]


@dataclass
class Tally:
    latencies: list[float] = field(default_factory=list)
    sent: int = 0  # request body bytes
    failed: list[str] = field(default_factory=list)
    seconds: float = 0.0
    cpu: float = 0.0
    broker_cpu: float = 0.0


async def post(http: aiohttp.ClientSession, url: str, body: dict) -> tuple[int, bytes, int]:
    raw = orjson.dumps(body)
    headers = {"Authorization": f"Bearer {load.KEY}", "Content-Type": "application/json"}
    async with http.post(url, data=raw, headers=headers) as response:
        return response.status, await response.read(), len(raw)


async def converse(http: aiohttp.ClientSession, url_for: Callable[[int], str], name: str, way: str,
                   args: argparse.Namespace, until: float, tally: Tally) -> None:
    """Conversations one after the other until `until` (the last one cut there, between turns); a refused turn
    ends its conversation (a continuation's chain is broken) and the next one starts."""
    number = 0
    while time.monotonic() < until:
        conversation, url = Conversation(way, args.tokens), url_for(number)
        for turn in range(args.turns):
            if time.monotonic() >= until:
                return
            body = conversation.body(user_text(f"{name}-{number}", turn, args.turn_bytes))
            started = time.perf_counter()
            status, payload, sent = await post(http, url, body)
            if status != 200:
                tally.failed.append(f"{status} {payload[:120].decode(errors='replace')}")
                break
            tally.latencies.append(time.perf_counter() - started)
            tally.sent += sent
            conversation.absorb(orjson.loads(payload))
        number += 1


async def window(proxy: str, label: str, way: str, sessions: int, seconds: float, args: argparse.Namespace,
                 tally: Tally | None, cpu: Callable[[], float], broker_cpu: Callable[[], float]) -> None:
    """`sessions` concurrent sessions conversing `way` for `seconds`, counted into `tally` (None: a warm-up)."""
    counted = tally or Tally()

    def url_for(i: int) -> Callable[[int], str]:  # session i's conversation n: a session id of its own
        return lambda n: f"{proxy}/sessions/{label}-{way}-{i}-{n}{PATH}"

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http:
        cpu_before, broker_before, started = cpu(), broker_cpu(), time.monotonic()
        await asyncio.gather(*(
            converse(http, url_for(i), f"{label}-{i}", way, args, started + seconds, counted)
            for i in range(sessions)
        ))
        counted.seconds += time.monotonic() - started
        counted.cpu += cpu() - cpu_before
        counted.broker_cpu += broker_cpu() - broker_before


async def same_prompts(proxy: str, args: argparse.Namespace) -> list[tuple[int, int]]:
    """One conversation each way with the same messages: each turn's prompt tokens (whole, continuation)."""
    used: dict[str, list[int]] = {}
    async with aiohttp.ClientSession() as http:
        for way in WAYS:
            conversation, used[way] = Conversation(way, args.tokens), []
            url = f"{proxy}/sessions/check-{way}-{time.monotonic_ns()}{PATH}"
            for turn in range(args.turns):
                body = conversation.body(user_text("check", turn, args.turn_bytes))
                status, payload, _ = await post(http, url, body)
                if status != 200:
                    raise RuntimeError(f"{way} turn {turn + 1}: {status} {payload[:300].decode(errors='replace')}")
                response = orjson.loads(payload)
                conversation.absorb(response)
                used[way].append(response["usage"]["input_tokens"])
    return list(zip(used["whole"], used["continuation"], strict=True))


def pct(values: list[float], q: float) -> float:
    return load.pct(values, q) if values else float("nan")


def row(way: str, level: int, tally: Tally) -> tuple[str, list[float]]:
    turns = max(1, len(tally.latencies))
    figures = [
        pct(tally.latencies, 0.5), pct(tally.latencies, 0.99), len(tally.latencies) / max(tally.seconds, 1e-9),
        tally.cpu / turns * 1e6, tally.broker_cpu / turns * 1e6, tally.sent / turns / 1024,
    ]
    p50, p99, rate, cpu, broker, sent = figures
    return (
        f"{way:>12} {level:>8} {p50:>8.2f}ms {p99:>8.2f}ms {rate:>9.1f} {cpu:>10.0f} us {broker:>10.0f} us "
        f"{sent:>8.2f} KB {len(tally.failed):>6}",
        figures,
    )


HEADER = (
    f"{'way':>12} {'sessions':>8} {'turn p50':>10} {'turn p99':>10} {'turns/s':>9} {'proxy CPU':>13} "
    f"{'broker CPU':>13} {'sent/turn':>11} {'failed':>6}"
)


def measure(proxy: str, level: int, args: argparse.Namespace, cpu: Callable[[], float],
            broker_cpu: Callable[[], float]) -> None:
    label = f"cont-{level}-{time.monotonic_ns()}"
    for way in WAYS:  # warm-up: sessions, connections, the stored-responses follower
        asyncio.run(window(proxy, f"{label}-warm", way, level, 1.0, args, None, cpu, broker_cpu))
    tallies = {way: Tally() for way in WAYS}
    for round_ in range(args.rounds):
        for way in WAYS if round_ % 2 == 0 else tuple(reversed(WAYS)):
            asyncio.run(window(proxy, f"{label}-r{round_}", way, level, args.seconds / args.rounds, args,
                               tallies[way], cpu, broker_cpu))
    figures = {}
    for way in WAYS:
        line, figures[way] = row(way, level, tallies[way])
        print(line, flush=True)
        for reason in sorted(set(tallies[way].failed))[:3]:
            print(f"{'':>12} {'':>8} refused: {reason}")
    ratios = [c / w if w else float("nan") for c, w in zip(figures["continuation"], figures["whole"], strict=True)]
    print(
        f"{'cont/whole':>12} {level:>8} {ratios[0]:>9.3f}x {ratios[1]:>9.3f}x {ratios[2]:>8.3f}x "
        f"{ratios[3]:>12.3f}x {ratios[4]:>12.3f}x {ratios[5]:>10.3f}x",
        flush=True,
    )


def run(args: argparse.Namespace, client: Any, engine: str, work: Path, broker: list[subprocess.Popen]) -> None:
    """One proxy process; the prompt check; then per level both ways, alternating, and their ratios."""
    procs, proxy = load.start_proxies(client, engine, 1, work)
    try:
        seen: dict[int, float] = {}
        checked = asyncio.run(same_prompts(proxy, args))
        same = all(whole == cont for whole, cont in checked)
        print(
            f"conversations of {args.turns} turns, user messages of ~{args.turn_bytes} bytes, non-streaming; "
            f"{args.rounds} alternating windows a level; engine prompt tokens per turn "
            + ("the same both ways: " if same else "DIFFER (whole vs continuation): ")
            + ", ".join(str(whole) if whole == cont else f"{whole} vs {cont}" for whole, cont in checked),
            flush=True,
        )
        print(HEADER)
        for level in (int(x) for x in args.levels.split(",")):
            measure(proxy, level, args, lambda: load.cpu_seconds(procs),
                    lambda: proxy_peers.tree_cpu(broker, seen))
        print(f"CPU columns: per turn; ratios under 1: the continuation is cheaper   (logs in {work})")
    finally:
        load.stop(procs)

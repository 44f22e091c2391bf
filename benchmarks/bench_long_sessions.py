"""Agent-scale data plane: long-horizon sessions, then 1k concurrent short ones, through proxy -> Kafka ->
assembler, with prompts recorded whole and as deltas (`proxy.prompt_deltas`) side by side in one run.

Every part is real but the engine: the StubEngine (a fake that returns fixed token ids, named as such) in
its own process, the proxy as `python -m services.proxy`, the embedded Apache Kafka node, one assembler
worker process. An agent session is a token-level loop on the completions API: each prompt is the last
prompt, the engine's completion and a tool output (`--tool-ids` random ids), from a `--first-ids` opening;
48 turns of 300 tool ids and 100-token completions end near 19k tokens. After the last turn every session
is still open (the assembler holds it whole), the assembler's resident memory is sampled, then every
session ends at once.

Reported per form and round (`--rounds`, forms alternating), with the deltas/whole ratios of the medians: calls/s
while the sessions run, bytes per call on the session-events topic, proxy and
assembler CPU per call, the assembler's resident memory per open session, and the latency from each
`/end`'s answer to its trajectory on the trajectories topic (p50/p99); then the same for `--short` sessions
of `--short-turns` turns, all at once (deltas on), with the number of trajectories that came out.

    .venv/bin/python benchmarks/bench_long_sessions.py [--sessions 16] [--turns 48] [--tool-ids 300]
        [--completion 100] [--short 1000] [--short-turns 4] [--forms whole,deltas] [--rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.bench_assembler import Output  # noqa: E402
from benchmarks.proxy_load import KEY, cpu_seconds, start, start_proxies, stop, wait_http  # noqa: E402
from seamlessflow.avro import Codec  # noqa: E402
from seamlessflow.broker.local import LocalBroker  # noqa: E402
from seamlessflow.kafka.admin import ensure_topics  # noqa: E402
from seamlessflow.kafka.reader import read_topic  # noqa: E402
from seamlessflow.messages import TokenIO  # noqa: E402
from seamlessflow.ports import free_port  # noqa: E402
from seamlessflow.testing.assembler_harness import AssemblerProcess  # noqa: E402
from seamlessflow.topics import Topics  # noqa: E402

HEADERS = {"Authorization": f"Bearer {KEY}"}


@dataclass
class Shape:
    turns: int
    first_ids: int
    tool_ids: int
    completion: int


@dataclass
class Run:
    calls: int = 0
    call_latencies: list[float] = field(default_factory=list)
    ended: dict[str, float] = field(default_factory=dict)  # session id -> when its /end was answered
    final_tokens: int = 0


async def agent_session(http, proxy: str, session_id: str, shape: Shape, run: Run, rng: random.Random) -> None:
    """The turns of one session; the session stays open (no /end)."""
    prompt = [rng.randrange(50_000) for _ in range(shape.first_ids)]
    url = f"{proxy}/sessions/{session_id}/v1/completions"
    for _turn in range(shape.turns):
        body = {"model": "stub-model", "prompt": prompt, "max_tokens": shape.completion, "return_token_ids": True}
        started = time.perf_counter()
        async with http.post(url, json=body, headers=HEADERS) as response:
            reply = await response.json()
            if response.status != 200:
                raise RuntimeError(f"{session_id}: {response.status} {reply}")
        run.call_latencies.append(time.perf_counter() - started)
        run.calls += 1
        prompt = prompt + reply["choices"][0]["token_ids"] + [rng.randrange(50_000) for _ in range(shape.tool_ids)]
    run.final_tokens = max(run.final_tokens, len(prompt) - shape.tool_ids)


async def end_session(http, proxy: str, session_id: str, run: Run) -> None:
    async with http.post(f"{proxy}/sessions/{session_id}/end", json={"reward": 1.0}, headers=HEADERS) as response:
        if response.status != 200:
            raise RuntimeError(f"{session_id}/end: {response.status} {await response.text()}")
    run.ended[session_id] = time.perf_counter()


async def sessions_then_ends(proxy: str, ids: list[str], shape: Shape, run: Run, between) -> float:
    """Every session's turns at once (seconds they took), `between()`, then every /end at once."""
    rng = random.Random(7)
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0),
                                     timeout=aiohttp.ClientTimeout(total=1800)) as http:
        started = time.perf_counter()
        await asyncio.gather(*(agent_session(http, proxy, sid, shape, run, random.Random(rng.random())) for sid in ids))
        turns_s = time.perf_counter() - started
        await asyncio.to_thread(between)
        await asyncio.gather(*(end_session(http, proxy, sid, run) for sid in ids))
    return turns_s


def wait_quiet(process: psutil.Process, idle_cpu_s: float = 0.02, every_s: float = 0.5) -> None:
    """Until the process used under `idle_cpu_s` of CPU in `every_s` (it has read everything published)."""
    last = sum(process.cpu_times()[:2])
    while True:
        time.sleep(every_s)
        now = sum(process.cpu_times()[:2])
        if now - last < idle_cpu_s:
            return
        last = now


def bytes_per_call(settings, codec) -> float:
    sizes = [len(r.value or b"") for r in read_topic(settings, Topics(settings).session_events, codec)
             if isinstance(r.message, TokenIO)]
    return sum(sizes) / max(1, len(sizes))


def measure(broker, engine: str, work: Path, name: str, shape: Shape, sessions: int, deltas: bool) -> dict:
    """One form, one shape: proxy + assembler on fresh topics, the sessions, then the figures."""
    settings = broker.client_settings.with_overrides(topic_prefix=f"{name}{uuid.uuid4().hex[:6]}",
                                                     data_dir=work / name, team_keys={"bench": KEY})
    ensure_topics(settings)
    codec = Codec()
    (work / name).mkdir()
    assembler = AssemblerProcess(settings, work / name).start()
    proxies, proxy = start_proxies(settings, engine, 1, work, prompt_deltas=deltas, max_queued=100_000)
    output, run = Output(settings, codec), Run()
    try:
        process = psutil.Process(assembler.running.pid)
        wait_quiet(process)
        rss0, cpu0, proxy_cpu0 = process.memory_info().rss, sum(process.cpu_times()[:2]), cpu_seconds(proxies)
        held: list[int] = []
        threading.Thread(target=output.drain, args=(sessions, 1800), daemon=True).start()  # notes arrival times

        def between() -> None:
            wait_quiet(process)
            held.append(process.memory_info().rss - rss0)

        ids = [f"{name}-{i}" for i in range(sessions)]
        turns_s = asyncio.run(sessions_then_ends(proxy, ids, shape, run, between))
        deadline = time.monotonic() + 600
        while len(output.arrived) < sessions and time.monotonic() < deadline:
            time.sleep(0.1)
        wait_quiet(process)
        latencies = [(output.arrived[s] - run.ended[s]) * 1000 for s in ids if s in output.arrived]
        return {"calls/s": run.calls / turns_s, "bytes/call": bytes_per_call(settings, codec),
                "proxy CPU/call": (cpu_seconds(proxies) - proxy_cpu0) / run.calls * 1e6,
                "assembler CPU/call": (sum(process.cpu_times()[:2]) - cpu0) / run.calls * 1e6,
                "MiB/open session": held[0] / sessions / 2**20, "final tokens": run.final_tokens,
                "call p50": pct(run.call_latencies, 50) * 1000, "call p99": pct(run.call_latencies, 99) * 1000,
                "end->trajectory p50": pct(latencies, 50), "end->trajectory p99": pct(latencies, 99),
                "trajectories": len(output.arrived), "sessions": sessions, "calls": run.calls}
    finally:
        stop(proxies)
        assembler.stop()


def pct(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100)[q - 1] if len(values) > 1 else (values or [float("nan")])[0]


def show(title: str, figures: dict) -> None:
    print(f"{title}: {figures['sessions']} sessions, {figures['calls']} calls, {figures['final tokens']} tokens at "
          f"the last turn; {figures['calls/s']:.0f} calls/s; {figures['bytes/call']:.0f} bytes/call on the wire; "
          f"proxy {figures['proxy CPU/call']:.0f} µs and assembler {figures['assembler CPU/call']:.0f} µs CPU/call; "
          f"assembler {figures['MiB/open session']:.2f} MiB resident per open session; call p50/p99 "
          f"{figures['call p50']:.0f}/{figures['call p99']:.0f} ms; end -> trajectory p50/p99 "
          f"{figures['end->trajectory p50']:.0f}/{figures['end->trajectory p99']:.0f} ms; "
          f"{figures['trajectories']}/{figures['sessions']} trajectories", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=16)
    parser.add_argument("--turns", type=int, default=48)
    parser.add_argument("--first-ids", type=int, default=200)
    parser.add_argument("--tool-ids", type=int, default=300)
    parser.add_argument("--completion", type=int, default=100)
    parser.add_argument("--short", type=int, default=1000, help="concurrent short sessions (0: skip)")
    parser.add_argument("--short-turns", type=int, default=4)
    parser.add_argument("--forms", default="whole,deltas", help="prompt forms to compare: whole, deltas")
    parser.add_argument("--rounds", type=int, default=2, help="long-session runs per form, alternating forms")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-long-"))
    broker = LocalBroker(work / "broker").start()
    engine_port = free_port()
    engine = start(
        [sys.executable, "-m", "seamlessflow.loadtest.stub_engine", str(engine_port), "0"], work / "stub.log"
    )
    try:
        wait_http(f"http://127.0.0.1:{engine_port}/health")
        url = f"http://127.0.0.1:{engine_port}"
        print(f"StubEngine (fake, no delay); one proxy and one assembler process; {psutil.cpu_count()} cores")
        long_shape = Shape(args.turns, args.first_ids, args.tool_ids, args.completion)
        results: dict[str, list[dict]] = {}
        for r in range(args.rounds):  # forms alternate, so a change in the machine's load hits both
            for form in args.forms.split(","):
                results.setdefault(form, []).append(
                    measure(broker, url, work, f"long-{form}-{r}", long_shape, args.sessions, form == "deltas"))
                show(f"round {r}, long, prompts {form}", results[form][-1])
        if {"whole", "deltas"} <= results.keys():
            for key in ("bytes/call", "assembler CPU/call", "proxy CPU/call", "MiB/open session", "calls/s"):
                ratio = (statistics.median(f[key] for f in results["deltas"])
                         / statistics.median(f[key] for f in results["whole"]))
                print(f"long, deltas / whole, {key} (medians of {args.rounds} rounds): {ratio:.3f}")
        if args.short:
            short = measure(broker, url, work, "short", Shape(args.short_turns, 64, 16, 16), args.short, True)
            show("short, prompts deltas", short)
    finally:
        stop([engine])
        broker.stop()


if __name__ == "__main__":
    main()

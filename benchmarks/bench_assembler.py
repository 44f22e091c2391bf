"""Assembler throughput and latency: pure core vs end to end through the real broker, side by side.

Prints calls/s of the pure core (SessionAssembler.add + finish) and end to end (session-events topic in ->
trajectories topic out, one worker process) for 8- and 32-turn sessions, their ratio, and the latency from
publishing an EpisodeEnd to reading its trajectory (p50/p99). End to end is measured twice: while the
benchmark publishes (bounded by the publisher on the same cores) and draining a backlog published before the
worker started (the worker's own rate). Targets: >= 10k calls/s per worker end to end, p99 <= 200 ms.

    .venv/bin/python benchmarks/bench_assembler.py [--sessions 300] [--latency-sessions 200] [--backlog-calls 16000]
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from confluent_kafka import Consumer, TopicPartition  # noqa: E402

from seamlessflow.avro import Codec  # noqa: E402
from seamlessflow.core.assembler import SessionAssembler  # noqa: E402
from seamlessflow.core.prefix_tree import Call  # noqa: E402
from seamlessflow.kafka.admin import ensure_topics  # noqa: E402
from seamlessflow.kafka.clients import consumer_config  # noqa: E402
from seamlessflow.kafka.io import MessageProducer  # noqa: E402
from seamlessflow.topics import Topics  # noqa: E402
from seamlessflow.broker.local import LocalBroker  # noqa: E402
from tests.services.assembler_harness import AssemblerProcess, episode_end, token_io  # noqa: E402


def make_session(turns: int, rng: random.Random, name: str, gap: int = 20, completion: int = 30) -> list[Call]:
    """An agent loop: each prompt repeats the history and adds a tool/user turn (`gap` ids)."""
    history, calls = [rng.randrange(50_000) for _ in range(200)], []
    for t in range(turns):
        prompt = history + [rng.randrange(50_000) for _ in range(gap)]
        out = [rng.randrange(50_000) for _ in range(completion)]
        calls.append(Call(f"{name}c{t}.0", prompt, out, [-rng.random() for _ in out], [0] * completion))
        history = prompt + out
    return calls


def bench_core(sessions: list[list[Call]]) -> float:
    start = time.perf_counter()
    for calls in sessions:
        assembler = SessionAssembler()
        for call in calls:
            assembler.add(call)
        assembler.finish()
    return sum(len(c) for c in sessions) / (time.perf_counter() - start)


class Output:
    """Reads the trajectories topic from its start, counting records and noting when each arrived."""

    def __init__(self, settings, codec):
        self.codec, self.topic = codec, Topics(settings).trajectories
        self.consumer = Consumer(consumer_config(settings, f"bench-{uuid.uuid4().hex[:6]}", **{"fetch.wait.max.ms": 10}))
        parts = self.consumer.list_topics(self.topic, timeout=10).topics[self.topic].partitions
        self.consumer.assign([TopicPartition(self.topic, p, 0) for p in parts])
        self.arrived: dict[str, float] = {}

    def drain(self, until_count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while len(self.arrived) < until_count and time.monotonic() < deadline:
            for msg in self.consumer.consume(1000, 0.05):
                if not msg.error():
                    self.arrived.setdefault(self.codec.decode(msg.value()).session_id, time.perf_counter())


def publish_sessions(producer, topic, sessions: dict[str, list[Call]], end: bool = True) -> None:
    """Every call of every session (and its end), flushed: nothing is left in the producer's queue."""
    for sid, calls in sessions.items():
        for call in calls:
            producer.send(topic, sid, token_io(sid, call))
        if end:
            producer.send(topic, sid, episode_end(sid))
    producer.flush()


def bench_e2e(settings, codec, output: Output, sessions: dict[str, list[Call]]) -> tuple[float, float]:
    """All sessions published as fast as possible; calls/s from the first publish to the last trajectory."""
    producer = MessageProducer(settings, codec)
    topic = Topics(settings).session_events
    start = time.perf_counter()
    publish_sessions(producer, topic, sessions)
    produced = time.perf_counter() - start
    output.drain(len(output.arrived) + len(sessions), 600)
    elapsed = max(output.arrived[s] for s in sessions) - start
    return sum(len(c) for c in sessions.values()) / elapsed, sum(len(c) for c in sessions.values()) / produced


def bench_backlog(settings, codec, tmp: Path, sessions: dict[str, list[Call]]) -> float:
    """The worker's own drain rate: every session is on the topic before the worker starts, no publisher beside
    it on the same cores. Calls/s from the first trajectory out to the last (the first session not counted)."""
    ensure_topics(settings)
    publish_sessions(MessageProducer(settings, codec), Topics(settings).session_events, sessions)
    output = Output(settings, codec)
    worker = AssemblerProcess(settings, tmp).start()
    try:
        output.drain(len(sessions), 600)
    finally:
        worker.stop()
    arrivals = sorted(output.arrived.values())
    per_session = len(next(iter(sessions.values())))
    return (sum(len(c) for c in sessions.values()) - per_session) / (arrivals[-1] - arrivals[0])


def bench_latency(settings, codec, output: Output, sessions: dict[str, list[Call]]) -> list[float]:
    """One session at a time: its calls, a pause, then its end; ms from publishing the end to the trajectory."""
    producer = MessageProducer(settings, codec)
    topic = Topics(settings).session_events
    latencies = []
    for sid, calls in sessions.items():
        publish_sessions(producer, topic, {sid: calls}, end=False)
        time.sleep(0.01)
        sent = time.perf_counter()
        producer.send(topic, sid, episode_end(sid))
        producer.flush()
        output.drain(len(output.arrived) + 1, 30)
        latencies.append((output.arrived[sid] - sent) * 1000)
    return latencies


def pct(values: list[float], q: float) -> float:
    return statistics.quantiles(values, n=100)[int(q) - 1] if len(values) > 1 else values[0]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=300)
    parser.add_argument("--latency-sessions", type=int, default=200)
    parser.add_argument("--backlog-calls", type=int, default=16_000)
    args = parser.parse_args()
    rng = random.Random(0)
    tmp = Path(tempfile.mkdtemp(prefix="bench-assembler-"))
    broker = LocalBroker(tmp / "broker").start()
    codec = Codec()
    try:
        def fresh_settings():
            return broker.client_settings.with_overrides(topic_prefix=f"b{uuid.uuid4().hex[:6]}", data_dir=tmp / "d")

        settings = fresh_settings()
        ensure_topics(settings)
        worker = AssemblerProcess(settings, tmp).start()
        output = Output(settings, codec)
        warm = {f"warm{i}": make_session(2, rng, f"warm{i}") for i in range(5)}
        publish_sessions(MessageProducer(settings, codec), Topics(settings).session_events, warm)
        output.drain(5, 120)
        print(f"{'turns':>5} {'core calls/s':>13} {'e2e calls/s':>12} {'e2e/core':>9} {'publish calls/s':>16} "
              f"{'backlog calls/s':>16} {'backlog/core':>13}")
        for turns in (8, 32):
            n = max(10, args.sessions * 8 // turns)
            sessions = {f"t{turns}s{i}": make_session(turns, rng, f"t{turns}s{i}") for i in range(n)}
            core = bench_core(list(sessions.values()))
            e2e, publish_rate = bench_e2e(settings, codec, output, sessions)
            backlog = {f"b{turns}s{i}": make_session(turns, rng, f"b{turns}s{i}") for i in range(args.backlog_calls // turns)}
            (tmp / f"backlog{turns}").mkdir()
            drained = bench_backlog(fresh_settings(), codec, tmp / f"backlog{turns}", backlog)
            print(f"{turns:>5} {core:>13.0f} {e2e:>12.0f} {e2e / core:>9.3f} {publish_rate:>16.0f} "
                  f"{drained:>16.0f} {drained / core:>13.3f}")
        lat_sessions = {f"lat{i}": make_session(8, rng, f"lat{i}") for i in range(args.latency_sessions)}
        latencies = bench_latency(settings, codec, output, lat_sessions)
        print(f"episode end -> trajectory: p50 {pct(latencies, 50):.1f} ms, p99 {pct(latencies, 99):.1f} ms "
              f"({len(latencies)} sessions, 8 turns)")
        worker.stop()
    finally:
        broker.stop()


if __name__ == "__main__":
    main()

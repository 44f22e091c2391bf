"""Assembler throughput and latency: pure core vs end to end through the real broker, side by side.

Prints calls/s of the pure core (SessionAssembler.add + finish), of the worker's own per-record work without
Kafka ("book": decode, longest-prefix matching, invariant checks, trajectory encoding, on pre-encoded
records), and end to end (session-events topic in -> trajectories topic out, one worker process) for 8- and
32-turn sessions, and the latency from publishing an EpisodeEnd to reading its trajectory (p50/p99). End to
end is measured twice: while the benchmark publishes (bounded by the publisher on the same cores) and
draining a backlog published before the worker started (the worker's own rate). Each wire format
(`--formats`: packed token arrays, or the Avro arrays written before packing) runs in the same process, one
after the other, so their ratio is taken side by side. Targets: >= 10k calls/s per worker end to end,
p99 <= 200 ms. `--profile DIR` also writes a cProfile of one backlog drain per format (worker process).
`--baseline TREE`
also drains every backlog with the worker of another source tree (say `git archive <commit>` unpacked), in
the same rounds, alternating with this tree's, and prints this tree's rate over that one's (its backlogs are
written with TokenIO schema v3, which that tree can read). `--backlog-only`
skips the live rates and latency. `--long` measures long-horizon sessions instead (48 turns, tool outputs
of 300 ids and completions of 100, growing to ~19k tokens): bytes per call, the worker's own work per call
in-process (calls/s and CPU µs), the memory an open session holds, and a backlog drain through one worker.
`--scaling` runs one consumer group of each size in `--workers` (default 1,2) on the same 8-turn sessions,
alternating: the workers are started and hold their partitions before the sessions are published.

    .venv/bin/python benchmarks/bench_assembler.py [--sessions 300] [--latency-sessions 200] [--backlog-calls 16000]
        [--rounds 3] [--formats packed,arrays] [--profile DIR] [--baseline TREE] [--backlog-only]
        [--long [--long-sessions 40]] [--scaling [--workers 1,2,4] [--partitions 8] [--publishers 2]]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


from seamlessflow.assembler import AssemblerOptions, SessionBook  # noqa: E402
from seamlessflow.avro import Codec  # noqa: E402
from seamlessflow.avro.packing import to_wire  # noqa: E402
from seamlessflow.broker.local import LocalBroker  # noqa: E402
from seamlessflow.core.assembler import SessionAssembler  # noqa: E402
from seamlessflow.core.prefix_tree import Call  # noqa: E402
from seamlessflow.kafka.admin import ensure_topics  # noqa: E402
from seamlessflow.kafka.io import MessageProducer  # noqa: E402
from seamlessflow.kafka.subscriber import Subscriber  # noqa: E402
from seamlessflow.messages import TokenIO  # noqa: E402
from seamlessflow.testing.assembler_harness import AssemblerProcess, episode_end, token_io  # noqa: E402
from seamlessflow.testing.samples import encode_with_schema, previous_schema  # noqa: E402
from seamlessflow.topics import Topics  # noqa: E402


def make_session(turns: int, rng: random.Random, name: str, gap: int = 20, completion: int = 30) -> list[Call]:
    """An agent loop: each prompt repeats the history and adds a tool/user turn (`gap` ids)."""
    history, calls = [rng.randrange(50_000) for _ in range(200)], []
    for t in range(turns):
        prompt = history + [rng.randrange(50_000) for _ in range(gap)]
        out = [rng.randrange(50_000) for _ in range(completion)]
        calls.append(Call(f"{name}c{t}.0", prompt, out, [-rng.random() for _ in out], [0] * completion))
        history = prompt + out
    return calls


def open_session_bytes(codec: Codec, sessions: dict[str, list[Call]]) -> float:
    """Memory one open session holds in the worker (all its calls applied, no end yet), by tracemalloc."""
    import tracemalloc

    records = [r for r in encoded_sessions(codec, sessions) if codec.decode(r[1]).__class__.__name__ == "TokenIO"]
    book = SessionBook(AssemblerOptions(), codec, "b")
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    for offset, (key, value) in enumerate(records):
        book.on_record(0, offset, key, value)
    held = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    return held / len(sessions)


def run_long(broker, tmp: Path, args) -> None:
    """Long-horizon sessions: in-process figures, then backlog drains (packed) through one worker."""
    rng = random.Random(3)
    turns = 48
    sessions = {f"L{i}": make_session(turns, rng, f"L{i}", gap=300, completion=100) for i in range(args.long_sessions)}
    final = len(sessions["L0"][-1].prompt_ids) + 100
    codec, fresh_settings = _codec_and_settings(broker, tmp, "packed")
    rate, size, cpu_us = bench_book(codec, sessions)
    held = open_session_bytes(codec, dict(list(sessions.items())[:10]))
    print(f"long sessions: {turns} turns, {final} tokens at the end; {size:.0f} bytes per call on the wire; "
          f"worker's own work in-process {rate:.0f} calls/s ({cpu_us:.0f} CPU µs per call); "
          f"an open session holds {held / 2**20:.2f} MiB", flush=True)
    for r in range(args.rounds):
        (tmp / f"long{r}").mkdir()
        wall, per_cpu = bench_backlog(fresh_settings(), codec, tmp / f"long{r}", sessions)
        print(f"long backlog drain round {r}: {wall:.0f} calls/s, {per_cpu:.0f} calls per worker CPU-second",
              flush=True)


def bench_core(sessions: list[list[Call]]) -> float:
    start = time.perf_counter()
    for calls in sessions:
        assembler = SessionAssembler(AssemblerOptions().assembler_config())
        for call in calls:
            assembler.add(call)
        assembler.finish()
    return sum(len(c) for c in sessions) / (time.perf_counter() - start)


def encoded_sessions(codec: Codec, sessions: dict[str, list[Call]]) -> list[tuple[bytes, bytes]]:
    out = []
    for sid, calls in sessions.items():
        out += [(sid.encode(), codec.encode(token_io(sid, call), "b")) for call in calls]
        out.append((sid.encode(), codec.encode(episode_end(sid), "b")))
    return out


def bench_book(codec: Codec, sessions: dict[str, list[Call]]) -> tuple[float, float, float]:
    """The worker's per-record work without Kafka: calls/s, bytes per call on the wire, CPU µs per call."""
    records = encoded_sessions(codec, sessions)
    book = SessionBook(AssemblerOptions(), codec, "b")
    start, cpu = time.perf_counter(), time.process_time()
    for offset, (key, value) in enumerate(records):
        for trajectory in book.on_record(0, offset, key, value).trajectories:
            codec.encode(trajectory, "t")
    elapsed, cpu = time.perf_counter() - start, time.process_time() - cpu
    calls = sum(len(c) for c in sessions.values())
    return calls / elapsed, sum(len(v) for _, v in records) / calls, cpu / calls * 1e6


class Output:
    """Reads the trajectories topic from its start, counting records and noting when each arrived."""

    def __init__(self, settings, codec):
        self.codec, self.topic = codec, Topics(settings).trajectories
        self.consumer = Subscriber(settings, codec, None, name="bench", config={"fetch.wait.max.ms": 10})
        self.consumer.follow(self.topic)
        self.arrived: dict[str, float] = {}

    def drain(self, until_count: int, timeout_s: float, cpu=None) -> list[tuple[int, float]]:
        """With `cpu` (a worker's CPU seconds so far), returns (trajectories seen, CPU seconds) as they arrive."""
        deadline, marks = time.monotonic() + timeout_s, []
        while len(self.arrived) < until_count and time.monotonic() < deadline:
            seen = len(self.arrived)
            for trajectory in self.consumer.messages(0.05, 1000):
                self.arrived.setdefault(trajectory.session_id, time.perf_counter())
            if cpu is not None and len(self.arrived) > seen:
                marks.append((len(self.arrived), cpu()))
        return marks


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


class ProfiledAssembler(AssemblerProcess):
    """The worker under cProfile; SIGHUP makes it write its profile (it is killed afterwards, not stopped)."""

    def __init__(self, settings, tmp_path: Path, profile: Path):
        super().__init__(settings, tmp_path)
        self.profile = profile

    def start(self) -> ProfiledAssembler:
        import subprocess

        tmp = str(self.profile) + ".part"  # renamed when complete: stop() waits for the final name
        code = ("import cProfile, os, runpy, signal, sys; p = cProfile.Profile(); "
                f"signal.signal(signal.SIGHUP, lambda *a: (p.dump_stats({tmp!r}), os.replace({tmp!r}, "
                f"{str(self.profile)!r}))); "
                "sys.argv = ['services.assembler', '--config', sys.argv[1]]; p.enable(); "
                "runpy.run_module('services.assembler', run_name='__main__')")
        log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([sys.executable, "-c", code, str(self.config)], cwd=ROOT, stdout=log,
                                     stderr=log, start_new_session=True)
        return self

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGHUP)
            deadline = time.monotonic() + 30
            while not self.profile.exists() and time.monotonic() < deadline:
                time.sleep(0.2)
        super().stop()


class EarlierWriterCodec(Codec):
    """Writes TokenIO with schema v3 (before `attempt`): a tree from before that field has no registry to learn
    the new schema from, so its worker dead-letters records written with it. The bytes per call are the same."""

    def encode(self, message, topic: str) -> bytes:
        if not isinstance(message, TokenIO):
            return super().encode(message, topic)
        schema = previous_schema(TokenIO, 3)
        assert schema is not None
        return encode_with_schema(schema, to_wire(message, self.packed))


class TreeAssembler(AssemblerProcess):
    """The worker as another source tree has it (run from that tree, so its packages are the ones imported)."""

    def __init__(self, settings, tmp_path: Path, tree: Path):
        super().__init__(settings, tmp_path)
        self.tree = tree

    def start(self) -> TreeAssembler:
        import subprocess

        log = open(self.log_path, "ab")
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.proc = subprocess.Popen([sys.executable, "-m", "services.assembler", "--config", str(self.config)],
                                     cwd=self.tree, env=env, stdout=log, stderr=log, start_new_session=True)
        return self


def bench_backlog(settings, codec, tmp: Path, sessions: dict[str, list[Call]],
                  profile: Path | None = None, tree: Path | None = None) -> tuple[float, float]:
    """The worker's own drain rate: every session is on the topic before the worker starts, no publisher beside
    it on the same cores. Calls/s from the first trajectory out to the last (the first session not counted), and
    calls per CPU-second of the worker process over the same stretch (what one dedicated core would drain: far
    less sensitive to other jobs on a shared machine than wall time)."""
    import psutil

    ensure_topics(settings)
    writer = EarlierWriterCodec(packed=codec.packed) if tree is not None else codec
    publish_sessions(MessageProducer(settings, writer), Topics(settings).session_events, sessions)
    output = Output(settings, codec)
    if tree is not None:
        procs: list[AssemblerProcess] = [TreeAssembler(settings, tmp, tree)]
    elif profile is not None:
        procs = [ProfiledAssembler(settings, tmp, profile)]
    else:
        procs = [AssemblerProcess(settings, tmp)]
    for worker in procs:
        worker.start()
    processes = [psutil.Process(w.proc.pid) for w in procs]
    try:
        marks = output.drain(len(sessions), 600, cpu=lambda: sum(sum(p.cpu_times()[:2]) for p in processes))
    finally:
        for worker in procs:
            worker.stop()
    arrivals = sorted(output.arrived.values())
    per_session = len(next(iter(sessions.values())))
    wall = (sum(len(c) for c in sessions.values()) - per_session) / (arrivals[-1] - arrivals[0])
    (first, cpu0), (last, cpu1) = marks[0], marks[-1]
    return wall, (last - first) * per_session / max(cpu1 - cpu0, 1e-9)


def run_scaling(broker, tmp: Path, args) -> None:
    """One consumer group of 1, 2, ... workers on the same 8-turn sessions, alternating per round."""
    rng = random.Random(4)
    sessions = {f"w{i}": make_session(8, rng, f"w{i}") for i in range(args.backlog_calls // 8)}
    codec, fresh_settings = _codec_and_settings(broker, tmp, "packed")
    counts = [int(n) for n in args.workers.split(",")]
    rates: dict[int, list[tuple[float, float, float]]] = {n: [] for n in counts}
    for r in range(args.rounds):
        for n in counts:
            settings = fresh_settings().with_overrides(partitions={"session-events": args.partitions})
            rates[n].append(bench_group(settings, codec, tmp / f"scale{n}-{r}", sessions, n, args.publishers))
            wall, per_cpu, published = rates[n][-1]
            print(f"round {r}, {n} worker(s): {wall:.0f} calls/s, {per_cpu:.0f} calls per CPU-second of the "
                  f"workers (published at {published:.0f} calls/s)", flush=True)
    one = statistics.median(r[0] for r in rates[counts[0]])
    for n in counts[1:]:
        print(f"8-turn sessions, {n} workers / {counts[0]}, calls/s: "
              f"{statistics.median(r[0] for r in rates[n]) / one:.2f}x")


def bench_group(settings, codec, tmp: Path, sessions: dict[str, list[Call]], workers: int,
                publishers: int = 1) -> tuple[float, float, float]:
    """`workers` workers of one group, started first and left until each holds its partitions (so no rebalance
    falls inside the measured stretch); then every session is published, pre-encoded, by `publishers`
    processes (each a slice of the sessions, so a session's records keep their order). Returns calls/s from the
    first trajectory to the last, calls per CPU-second of the workers together,
    and the publishing rate (it must stay above the drain rate for the figure to be the workers')."""
    import psutil

    ensure_topics(settings)
    records = encoded_sessions(codec, sessions)
    output = Output(settings, codec)
    procs = [AssemblerProcess(settings, _mkdir(tmp / f"w{i}")).start() for i in range(workers)]
    try:
        _wait_until_shared(procs, settings.partitions["session-events"], 120)
        processes = [psutil.Process(w.running.pid) for w in procs]
        start = time.perf_counter()
        publish_in_processes(settings, records, publishers)
        published = sum(len(c) for c in sessions.values()) / (time.perf_counter() - start)
        marks = output.drain(len(sessions), 600, cpu=lambda: sum(sum(p.cpu_times()[:2]) for p in processes))
    finally:
        for worker in procs:
            worker.stop()
    arrivals = sorted(output.arrived.values())
    per_session = len(next(iter(sessions.values())))
    wall = (sum(len(c) for c in sessions.values()) - per_session) / (arrivals[-1] - arrivals[0])
    (first, cpu0), (last, cpu1) = marks[0], marks[-1]
    return wall, (last - first) * per_session / max(cpu1 - cpu0, 1e-9), published


def publish_in_processes(settings, records: list[tuple[bytes, bytes]], publishers: int) -> None:
    """Pre-encoded (key, value) records, split by key over `publishers` forked processes, each flushed."""
    import multiprocessing

    def publish(part: list[tuple[bytes, bytes]]) -> None:
        producer, topic = MessageProducer(settings, Codec()), Topics(settings).session_events
        for key, value in part:
            producer.send_bytes(topic, key, value)
        producer.flush()

    parts: list[list[tuple[bytes, bytes]]] = [[] for _ in range(publishers)]
    for key, value in records:
        parts[hash(key) % publishers].append((key, value))
    procs = [multiprocessing.get_context("fork").Process(target=publish, args=(part,)) for part in parts]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join()
        assert proc.exitcode == 0, f"a publisher exited with {proc.exitcode}"


def _wait_until_shared(workers: list[AssemblerProcess], partitions: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        owned = [w.assigned() for w in workers]
        if all(owned) and len(set().union(*owned)) == partitions and sum(map(len, owned)) == partitions:  # type: ignore[arg-type]
            return
        time.sleep(0.2)
    raise RuntimeError(f"workers did not share the {partitions} partitions: {[w.log() for w in workers]}")


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


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
    parser.add_argument("--rounds", type=int, default=3, help="backlog drains per format, alternating formats")
    parser.add_argument("--formats", default="packed,arrays", help="wire formats to compare: packed, arrays")
    parser.add_argument("--profile", type=Path, help="also drain each backlog under cProfile, profiles written here")
    parser.add_argument("--baseline", type=Path, help="another source tree whose worker drains the same backlogs")
    parser.add_argument("--backlog-only", action="store_true", help="skip the live rates and the latency")
    parser.add_argument("--long", action="store_true", help="long-horizon sessions only (see the docstring)")
    parser.add_argument("--long-sessions", type=int, default=40)
    parser.add_argument("--scaling", action="store_true", help="groups of --workers workers on one backlog, only")
    parser.add_argument("--workers", default="1,2", help="with --scaling: the group sizes to compare")
    parser.add_argument("--partitions", type=int, default=4, help="with --scaling: session-events partitions")
    parser.add_argument("--publishers", type=int, default=1, help="with --scaling: publishing processes")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-assembler-"))
    broker = LocalBroker(tmp / "broker").start()
    formats = args.formats.split(",")
    try:
        if args.long:
            run_long(broker, tmp, args)
            return
        if args.scaling:
            run_scaling(broker, tmp, args)
            return
        if not args.backlog_only:
            print(f"{'turns':>5} {'format':>7} {'bytes/call':>10} {'core calls/s':>13} {'book calls/s':>13} "
                  f"{'e2e calls/s':>12} {'publish calls/s':>16}")
            for fmt in formats:
                run_live(broker, tmp, fmt, args)
        drained = run_backlogs(broker, tmp, formats, args)
        print(f"backlog drain (the worker's own rate), median of {args.rounds} alternating rounds:")
        for key, rates in sorted(drained.items(), key=str):
            wall, cpu = [r[0] for r in rates], [r[1] for r in rates]
            turns, fmt = key[0], "/".join(key[1:])
            print(f"{turns:>5} {fmt:>7} {statistics.median(wall):>8.0f} calls/s (rounds: "
                  f"{', '.join(f'{r:.0f}' for r in wall)}); {statistics.median(cpu):>8.0f} calls per worker "
                  f"CPU-second (rounds: {', '.join(f'{r:.0f}' for r in cpu)})")
        for turns in (8, 32):
            if {(turns, "packed"), (turns, "arrays")} <= drained.keys():
                for i, what in enumerate(("calls/s", "calls per CPU-second")):
                    ratio = (statistics.median(r[i] for r in drained[turns, "packed"])
                             / statistics.median(r[i] for r in drained[turns, "arrays"]))
                    print(f"{turns}-turn backlog, packed / arrays, {what}: {ratio:.2f}x")
        for (turns, fmt) in [k for k in drained if len(k) == 2 and (*k, "baseline") in drained]:
            for i, what in enumerate(("calls/s", "calls per CPU-second")):
                ratio = (statistics.median(r[i] for r in drained[turns, fmt])
                         / statistics.median(r[i] for r in drained[turns, fmt, "baseline"]))
                print(f"{turns}-turn backlog, {fmt}, this tree / baseline, {what}: {ratio:.2f}x")
    finally:
        broker.stop()


def _codec_and_settings(broker, tmp: Path, fmt: str):
    packed = {"packed": True, "arrays": False}[fmt]

    def fresh_settings():
        return broker.client_settings.with_overrides(topic_prefix=f"b{uuid.uuid4().hex[:6]}", data_dir=tmp / "d",
                                                     packed_token_arrays=packed)

    return Codec(packed=packed), fresh_settings


def run_live(broker, tmp: Path, fmt: str, args) -> None:
    """Core, book and end-to-end rates, and latency, for one wire format (published and written by the worker)."""
    rng = random.Random(0)  # the same sessions for every format
    codec, fresh_settings = _codec_and_settings(broker, tmp, fmt)
    settings = fresh_settings()
    ensure_topics(settings)
    (tmp / fmt).mkdir()
    worker = AssemblerProcess(settings, tmp / fmt).start()
    output = Output(settings, codec)
    warm = {f"warm{i}": make_session(2, rng, f"warm{i}") for i in range(5)}
    publish_sessions(MessageProducer(settings, codec), Topics(settings).session_events, warm)
    output.drain(5, 120)
    for turns in (8, 32):
        n = max(10, args.sessions * 8 // turns)
        sessions = {f"t{turns}s{i}": make_session(turns, rng, f"t{turns}s{i}") for i in range(n)}
        core = bench_core(list(sessions.values()))
        book, size, _ = bench_book(codec, sessions)
        e2e, publish_rate = bench_e2e(settings, codec, output, sessions)
        print(f"{turns:>5} {fmt:>7} {size:>10.0f} {core:>13.0f} {book:>13.0f} {e2e:>12.0f} {publish_rate:>16.0f}",
              flush=True)
    if fmt == "packed" or args.formats == fmt:
        lat_sessions = {f"lat{i}": make_session(8, rng, f"lat{i}") for i in range(args.latency_sessions)}
        latencies = bench_latency(settings, codec, output, lat_sessions)
        print(f"episode end -> trajectory ({fmt}): p50 {pct(latencies, 50):.1f} ms, p99 {pct(latencies, 99):.1f} ms "
              f"({len(latencies)} sessions, 8 turns)", flush=True)
    worker.stop()


def run_backlogs(broker, tmp: Path, formats: list[str], args) -> dict[tuple, list[tuple[float, float]]]:
    """Backlog drains, formats alternating within each round so a load change on the machine hits both."""
    rng = random.Random(1)
    backlogs = {turns: {f"b{turns}s{i}": make_session(turns, rng, f"b{turns}s{i}")
                        for i in range(args.backlog_calls // turns)} for turns in (8, 32)}
    drained: dict[tuple, list[tuple[float, float]]] = {}
    for r in range(args.rounds):
        for turns, backlog in backlogs.items():
            for fmt in formats:
                codec, fresh_settings = _codec_and_settings(broker, tmp, fmt)
                (tmp / f"backlog{turns}{fmt}{r}").mkdir()
                drained.setdefault((turns, fmt), []).append(
                    bench_backlog(fresh_settings(), codec, tmp / f"backlog{turns}{fmt}{r}", backlog))
                if args.baseline:
                    (tmp / f"baseline{turns}{fmt}{r}").mkdir()
                    drained.setdefault((turns, fmt, "baseline"), []).append(bench_backlog(
                        fresh_settings(), codec, tmp / f"baseline{turns}{fmt}{r}", backlog, tree=args.baseline))
                if args.profile and r == 0:  # a separate drain: the profiler's overhead must not touch the figures
                    args.profile.mkdir(parents=True, exist_ok=True)
                    (tmp / f"profile{turns}{fmt}").mkdir()
                    bench_backlog(fresh_settings(), codec, tmp / f"profile{turns}{fmt}", backlog,
                                  args.profile / f"worker-{fmt}-{turns}turns.prof")
    return drained


if __name__ == "__main__":
    main()

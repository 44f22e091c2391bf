"""Start-up of the embedded broker (Apache Kafka, KRaft): a new data directory (storage formatted first),
a restart over existing data, and a 3-node cluster, each until every broker answers a metadata request.
`--class-archive`: one broker's life (format, start, stop) with and without the install's class archive
(`seamlessflow/broker/class_archive.py`), alternating, in wall seconds to ready and CPU-seconds.

    .venv/bin/python benchmarks/bench_broker.py [--rounds 3] [--class-archive]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from seamlessflow.broker.local import LocalBroker  # noqa: E402


def timed_start(broker: LocalBroker) -> float:
    began = time.perf_counter()
    broker.start(timeout_s=300)
    return time.perf_counter() - began


def children_cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def one_life(archive: str) -> tuple[float, float]:
    """(seconds until ready, CPU-seconds of format, start and stop) of a broker in a new data directory."""
    os.environ["SEAMLESSFLOW_BROKER_CLASS_ARCHIVE"] = archive
    before = children_cpu_s()
    broker = LocalBroker(Path(tempfile.mkdtemp(prefix="bench-broker-")))
    seconds = timed_start(broker)
    broker.stop()
    return seconds, children_cpu_s() - before


def compare_class_archive(rounds: int) -> None:
    figures: dict[str, list[tuple[float, float]]] = {"off": [], "on": []}
    for _ in range(rounds):
        for archive in figures:
            figures[archive].append(one_life(archive))
    print(f"one broker's life, {rounds} rounds alternating, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores; JVM options: {os.environ.get('SEAMLESSFLOW_BROKER_JVM_OPTIONS', '-')}")
    for archive, rows in figures.items():
        print(f"class archive {archive:>3}: ready after median {statistics.median(r[0] for r in rows):4.2f} s, "
              f"format+start+stop median {statistics.median(r[1] for r in rows):4.2f} CPU-s")
    off, on = (statistics.median(r[1] for r in figures[k]) for k in ("off", "on"))
    print(f"CPU with the archive / without: {on / off:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--class-archive", action="store_true")
    args = parser.parse_args()
    if args.class_archive:
        compare_class_archive(args.rounds)
        return
    figures: dict[str, list[float]] = {"1 node, new data dir": [], "1 node, restart": [], "3 nodes, new data dir": []}
    for _ in range(args.rounds):
        one = LocalBroker(Path(tempfile.mkdtemp(prefix="bench-broker-")))
        figures["1 node, new data dir"].append(timed_start(one))
        one.stop()
        figures["1 node, restart"].append(timed_start(one))
        one.stop()
        three = LocalBroker(Path(tempfile.mkdtemp(prefix="bench-broker-")), brokers=3)
        figures["3 nodes, new data dir"].append(timed_start(three))
        three.stop()
    print(f"embedded Kafka start-up until ready, {args.rounds} rounds, load average {os.getloadavg()[0]:.1f} "
          f"on {os.cpu_count()} cores")
    for name, values in figures.items():
        print(f"{name:>24}: median {statistics.median(values):5.1f} s  (min {min(values):.1f}, max {max(values):.1f})")


if __name__ == "__main__":
    main()

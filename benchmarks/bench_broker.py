"""Start-up of the embedded broker (Apache Kafka, KRaft): a new data directory (storage formatted first),
a restart over existing data, and a 3-node cluster, each until every broker answers a metadata request.

    .venv/bin/python benchmarks/bench_broker.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
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


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
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

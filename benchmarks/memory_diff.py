"""What grew between two memory snapshots of one service process (`seamlessflow/memory_probe.py`).

    .venv/bin/python benchmarks/memory_diff.py EARLIER.snap LATER.snap [--top 15] [--by lineno|traceback]

Prints the lines (or, with `--by traceback`, the call paths) whose live allocations grew most, with the
growth in KiB and in blocks, and the total growth of traced memory between the two.
"""

from __future__ import annotations

import argparse
import tracemalloc


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("earlier")
    parser.add_argument("later")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--by", choices=("lineno", "traceback", "filename"), default="lineno")
    args = parser.parse_args()
    ignore = [tracemalloc.Filter(False, tracemalloc.__file__),
              tracemalloc.Filter(False, "<frozen importlib._bootstrap>")]
    earlier = tracemalloc.Snapshot.load(args.earlier).filter_traces(ignore)
    later = tracemalloc.Snapshot.load(args.later).filter_traces(ignore)
    stats = later.compare_to(earlier, args.by)
    total = sum(s.size_diff for s in stats)
    print(f"traced memory grew {total / 2**20:+.2f} MiB")
    for stat in stats[: args.top]:
        print(f"{stat.size_diff / 1024:+10.1f} KiB {stat.count_diff:+8d} blocks  {stat.size / 2**20:8.2f} MiB now")
        for line in stat.traceback.format(limit=6 if args.by == "traceback" else 1):
            print(f"      {line}")


if __name__ == "__main__":
    main()

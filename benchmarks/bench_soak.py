"""Soak: many concurrent agent sessions for a fixed time on stub engines; memory per service, then the audit.

The stack is the chaos run's stub-engine stack (`seamlessflow/chaos/stack.py`): its own embedded Apache
Kafka node, assembler, proxy and DeepSpeed trainer on a random tiny model, and StubEngine processes (a
fake that generates fixed token ids, not an engine), all on 127.0.0.1. The chaos driver runs `--sessions`
sessions at once for `--seconds` (no faults unless `--faults`), a sampler records each service's resident
memory (process and children) and the broker's JVM heap (`jstat`) every `--every-s`, and the audit then
checks every acknowledged call, every trajectory bit for bit and the trainer's step log. Writes the curve as
CSV and PNG, and prints each service's memory slope (MiB/s, a least-squares line) over the agents' time
after `--warmup-s`: a leak is a slope that does not go to zero with a longer run.

    .venv/bin/python benchmarks/bench_soak.py [--sessions 500] [--seconds 600] [--faults 0] [--max-sessions N]
        [--warmup-s 180] [--set SECTION.KEY=VALUE ...] [--out benchmarks/figures]
"""

from __future__ import annotations

import argparse
import csv
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil
import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seamlessflow.chaos.config import ChaosConfig  # noqa: E402
from seamlessflow.chaos.report import render, summary  # noqa: E402
from seamlessflow.chaos.run import run_chaos  # noqa: E402
from seamlessflow.chaos.stack import stub_engine_stack  # noqa: E402
from seamlessflow.config import Settings  # noqa: E402
from seamlessflow.ports import free_port, free_port_block  # noqa: E402
from seamlessflow.stack.paths import run_dir
from seamlessflow.stack.services import with_stack_defaults  # noqa: E402
from seamlessflow.stack.supervisor import read_state  # noqa: E402


def rss_mb(pid: int) -> float:
    try:
        proc = psutil.Process(pid)
        return sum(p.memory_info().rss for p in [proc, *proc.children(recursive=True)]) / 2**20
    except psutil.NoSuchProcess:
        return float("nan")


def jvm_heap_mb(pid: int) -> float:
    """Used heap of a JVM (survivor, eden and old generations; `jstat -gc`), NaN when it cannot be read."""
    try:
        header, values = subprocess.run(["jstat", "-gc", str(pid)], capture_output=True, text=True,
                                        timeout=10).stdout.split("\n")[:2]
        gc = dict(zip(header.split(), map(float, values.split()), strict=True))
        return (gc["S0U"] + gc["S1U"] + gc["EU"] + gc["OU"]) / 1024
    except (OSError, ValueError, KeyError, subprocess.SubprocessError):
        return float("nan")


def sample(settings: Settings, every_s: float, rows: list[dict], done: threading.Event) -> None:
    started = time.monotonic()
    while not done.wait(every_s):
        services = (read_state(run_dir(settings)) or {}).get("services", {})
        row = {"t_s": round(time.monotonic() - started, 1), "wall_ms": int(time.time() * 1000)}
        row.update({name: round(rss_mb(s["pid"]), 1) for name, s in services.items() if s.get("pid")})
        if services.get("broker", {}).get("pid"):
            row["broker-heap"] = round(jvm_heap_mb(services["broker"]["pid"]), 1)
        rows.append(row)


def slopes(rows: list[dict], from_ms: int, to_ms: int) -> dict[str, float]:
    """MiB/s per column: the least-squares line through the samples taken between the two wall times."""
    import numpy as np

    kept = [r for r in rows if from_ms <= r["wall_ms"] <= to_ms]
    out = {}
    for name in sorted({k for r in kept for k in r} - {"t_s", "wall_ms"}):
        points = [(r["t_s"], r[name]) for r in kept if name in r and r[name] == r[name]]
        if len(points) >= 3:
            out[name] = float(np.polyfit(*zip(*points, strict=True), 1)[0])
    return out


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = sorted({k for row in rows for k in row if k not in ("t_s", "wall_ms")})
    fig, ax = plt.subplots(figsize=(8, 4))
    for name in names:
        ax.plot([r["t_s"] for r in rows if name in r], [r[name] for r in rows if name in r], label=name)
    ax.set_xlabel("seconds")
    ax.set_ylabel("resident memory, MiB (with children)")
    ax.legend(loc="upper left", fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)


def option_overrides(assignments: list[str]) -> dict[str, dict]:
    """`--set trainer.dedup_window=1000` as Settings overrides: {"trainer": {"dedup_window": 1000}}."""
    out: dict[str, dict] = {}
    for assignment in assignments:
        path, _, value = assignment.partition("=")
        section, _, key = path.partition(".")
        if not key or not value:
            raise SystemExit(f"--set wants SECTION.KEY=VALUE, got {assignment!r}")
        out.setdefault(section, {})[key] = yaml.safe_load(value)
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--seconds", type=float, default=600)
    parser.add_argument("--faults", type=int, default=0)
    parser.add_argument("--engines", type=int, default=2)
    parser.add_argument("--every-s", type=float, default=5.0)
    parser.add_argument("--max-sessions", type=int, default=None,
                        help="the proxy's per-session state bound (proxy.max_sessions; default 100 000)")
    parser.add_argument("--warmup-s", type=float, default=180.0,
                        help="seconds after the agents start that the slopes leave out")
    parser.add_argument("--set", action="append", default=[], metavar="SECTION.KEY=VALUE",
                        help="a stack option, e.g. trainer.dedup_window=1000 (repeatable; the value read as YAML)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "figures")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="soak-"))
    settings = with_stack_defaults(Settings(
        data_dir=work / "data", broker_port=free_port_block(2), topic_prefix="soak", stop_grace_s=30,
        proxy={"port": free_port(), **({"max_sessions": args.max_sessions} if args.max_sessions else {})},
        trainer={"batch_threshold": 4, "heartbeat_s": 2.0}))
    settings = settings.with_overrides(**option_overrides(args.set))
    settings, engines = stub_engine_stack(settings, args.engines, group_size=2)
    options = ChaosConfig(seed=1, faults=args.faults, every_s=args.seconds / max(args.faults, 1),
                           concurrency=args.sessions, settle_s=0 if args.faults else args.seconds, drain_s=180,
                           targets=("proxy", "assembler", "trainer", "engine-0") if args.faults else ())
    rows: list[dict] = []
    done = threading.Event()
    threading.Thread(target=sample, args=(settings, args.every_s, rows, done), daemon=True).start()
    try:
        result = run_chaos(settings, options, engines)
    finally:
        done.set()
    from rich.console import Console

    render(result, Console(width=160))
    args.out.mkdir(parents=True, exist_ok=True)
    with open(args.out / "soak_memory.csv", "w", newline="") as out:
        names = sorted({k for row in rows for k in row if k not in ("t_s", "wall_ms")})
        writer = csv.DictWriter(out, ["t_s", "wall_ms", *names])
        writer.writeheader()
        writer.writerows(rows)
    plot(rows, args.out / "soak_memory.png")
    agents_from = result.agents_stopped_ms - int(args.seconds * 1000) + int(args.warmup_s * 1000)
    fitted = slopes(rows, agents_from, result.agents_stopped_ms)
    print(f"service | MiB first sample | max | last | slope MiB/s after {args.warmup_s:.0f} s of agents")
    for name in names:
        values = [r[name] for r in rows if name in r and r[name] == r[name]]
        if values:
            slope = f"{fitted[name]:+.4f}" if name in fitted else "-"
            print(f"{name} | {values[0]:.0f} | {max(values):.0f} | {values[-1]:.0f} | {slope}")
    s = summary(result)
    print(
        f"calls acknowledged {s['calls_acknowledged']} ({s['calls_acknowledged'] / args.seconds:.0f}/s), "
        f"sessions ended {s['sessions_ended']}, trajectories verified {s['trajectories_verified']}, "
        f"violations {s['violations']}"
    )
    sys.exit(0 if result.ok else 1)


if __name__ == "__main__":
    main()

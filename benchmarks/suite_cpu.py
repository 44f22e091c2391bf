"""Where a command's CPU time goes, by kind of process: `python benchmarks/suite_cpu.py -- make test`.

Why: on 2 cores the suite is CPU-bound (load 15-25 through a CI run), so its wall time falls only when its CPU
work does; running more of it at once only moves the queue. This runs the command and samples every process
on the machine every `--every` seconds (psutil), keeping each process's last CPU time (user + system), and at
the end prints CPU-seconds by kind: vLLM engines, trainers, Kafka brokers, Ray, each stack service, the
pytest processes themselves, the browser, lint and the rest; then the test files whose processes spent most
(a process a test starts inherits pytest's PYTEST_CURRENT_TEST, read from /proc/<pid>/environ, so every
engine, broker, trainer and stack a file starts counts for that file; the pytest workers' own CPU does not).
A process that lived less than one interval is missed, and one that ended loses at most an interval: the
table prints what it saw beside the machine's own total (/proc/stat), so the gap is visible. Processes already
running when it starts count only what they spend from then on.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections import Counter, defaultdict
from dataclasses import dataclass

import psutil

KINDS: list[tuple[str, re.Pattern[str]]] = [
    ("vLLM engine", re.compile(r"vllm|VLLM::", re.I)),
    ("trainer (DeepSpeed)", re.compile(r"services\.trainer|deepspeed|torch\.distributed")),
    ("Kafka broker (JVM)", re.compile(r"java .*kafka", re.I)),
    ("Ray", re.compile(r"\bray\b|raylet|gcs_server|ray::|default_worker|dashboard_agent|runtime_env", re.I)),
    ("chaos/agents", re.compile(r"services\.agents|seamlessflow\.agents|codex|claude", re.I)),
    ("lint (ruff, mypy)", re.compile(r"\bruff\b|\bmypy\b")),
    ("browser", re.compile(r"chrom", re.I)),
    ("slurm", re.compile(r"slurm|munged")),
]
SERVICE = re.compile(r"services\.(\w+)")


def kind_of(cmdline: list[str], name: str) -> str:
    text = " ".join(cmdline) or name
    for kind, pattern in KINDS:
        if pattern.search(text):
            return kind
    if (service := SERVICE.search(text)) is not None:
        return f"service: {service.group(1)}"
    if re.search(r"-m seamlessflow\b|/bin/seamlessflow\b", text):
        return "seamlessflow CLI (up, down, the supervisor)"
    if re.search(r"-m pytest\b|/pytest\b|xdist|exec\(eval\(sys\.stdin", text):  # the latter: an xdist worker
        return "pytest (the tests' own processes)"  # (not a path under /tmp/pytest-of-<user>/ in its args)
    return f"other: {os.path.basename(cmdline[0]) if cmdline else name}"


def machine_cpu_s() -> float:
    """All CPU time the machine spent (user, nice, system, irq), in seconds."""
    fields = open("/proc/stat").readline().split()[1:8]
    busy = [int(v) for i, v in enumerate(fields) if i != 3 and i != 4]  # not idle, not iowait
    return sum(busy) / os.sysconf("SC_CLK_TCK")


@dataclass
class Seen:
    kind: str
    test_file: str  # the test file that started it ("" when none did)
    cpu: float


def test_file_of(proc: psutil.Process) -> str:
    """The test file a process was started under: pytest sets PYTEST_CURRENT_TEST while a test runs, and the
    test's children (and theirs) inherit it."""
    try:
        current = proc.environ().get("PYTEST_CURRENT_TEST", "")
    except (psutil.Error, OSError):
        return ""
    return current.split("::")[0]


def sample(seen: dict[tuple[int, float], Seen]) -> None:
    """Each process's kind and CPU time so far, keyed by (pid, start time) so a reused pid is another process.
    A process first seen as "other" is looked at again: one seen between its fork and its exec still showed its
    parent's command line, and a vLLM engine core names itself only once it has started. A multiprocessing
    child (`-c from multiprocessing.spawn ...`: a spawned trainer rank, an engine core before it names itself)
    is of its parent's kind."""
    for proc in psutil.process_iter(["pid", "ppid", "name", "cmdline", "create_time", "cpu_times"]):
        info = proc.info
        if info["cpu_times"] is None:
            continue
        key = (info["pid"], info["create_time"])
        cpu = info["cpu_times"].user + info["cpu_times"].system
        if key in seen and not seen[key].kind.startswith("other"):
            seen[key].cpu = cpu
            continue
        kind = kind_of(info["cmdline"] or [], info["name"] or "?")
        if kind.startswith("other") and MULTIPROCESSING_CHILD.search(" ".join(info["cmdline"] or [])):
            kind = parent_kind(seen, info["ppid"], kind)
        if key in seen:
            seen[key].kind, seen[key].cpu = kind, cpu
        else:
            seen[key] = Seen(kind, test_file_of(proc), cpu)


MULTIPROCESSING_CHILD = re.compile(r"multiprocessing\.spawn|multiprocessing-fork|multiprocessing\.forkserver")


def parent_kind(seen: dict[tuple[int, float], Seen], ppid: int, otherwise: str) -> str:
    try:
        parent = psutil.Process(ppid)
        row = seen.get((ppid, parent.create_time()))
    except psutil.Error:
        return otherwise
    return row.kind if row is not None and not row.kind.startswith("other") else otherwise


def by_test_file(seen: dict[tuple[int, float], Seen], start: dict[tuple[int, float], float], top: int) -> str:
    """The test files whose processes spent the most, with how many processes of each kind they started."""
    cpu: dict[str, float] = defaultdict(float)
    kinds: dict[str, Counter[str]] = defaultdict(Counter)
    for key, row in seen.items():
        if row.test_file:
            cpu[row.test_file] += row.cpu - start.get(key, 0.0)
            kinds[row.test_file][row.kind.split(" (")[0]] += 1
    lines = [f"\nThe {min(top, len(cpu))} test files whose processes spent the most ({sum(cpu.values()):.0f} CPU-s "
             f"over {len(cpu)} files; the pytest workers' own CPU is not in it):", f"{'CPU-s':>9}  file: processes"]
    for file, spent in sorted(cpu.items(), key=lambda kv: -kv[1])[:top]:
        counts = ", ".join(f"{n} {kind}" for kind, n in kinds[file].most_common(4))
        lines.append(f"{spent:9.0f}  {file}: {counts}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--every", type=float, default=2.0, help="seconds between samples")
    parser.add_argument("--top", type=int, default=20, help="kinds to print")
    parser.add_argument("--files", type=int, default=25, help="test files to print")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="the command, after --")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    seen: dict[tuple[int, float], Seen] = {}
    sample(seen)
    start = {key: row.cpu for key, row in seen.items()}  # what ran before counts from now on
    machine_before, wall_before = machine_cpu_s(), time.monotonic()
    proc = subprocess.Popen(command)
    while proc.poll() is None:
        time.sleep(args.every)
        sample(seen)
    wall, machine = time.monotonic() - wall_before, machine_cpu_s() - machine_before
    by_kind: dict[str, float] = defaultdict(float)
    for key, row in seen.items():
        by_kind[row.kind] += row.cpu - start.get(key, 0.0)
    total = sum(by_kind.values())
    print(f"\n{' '.join(command)}: exit {proc.returncode}, {wall:.0f} s wall; the machine spent {machine:.0f} CPU-s "
          f"({machine / wall:.2f} cores busy on average); the samples saw {total:.0f} CPU-s of it")
    print(f"{'CPU-s':>9} {'share':>6}  kind")
    for kind, cpu in sorted(by_kind.items(), key=lambda kv: -kv[1])[:args.top]:
        print(f"{cpu:9.0f} {cpu / max(total, 1e-9):6.1%}  {kind}")
    print(by_test_file(seen, start, args.files))
    sys.exit(proc.returncode)


if __name__ == "__main__":
    main()

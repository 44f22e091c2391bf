"""A newcomer's first run of their own agent, as the quickstart tells it: `seamlessflow up --detach` in a
directory, `seamlessflow init` for some harnesses there, the commands `init` printed, run side by side until
`agent run` says the published passes are spent, then `seamlessflow down`. Shared by the slow test
(tests/scaffold/test_first_run.py) and the run whose figures the quickstart quotes (benchmarks/first_run.py).

Everything runs as the user's shell would run it (processes, the printed command through `bash -c`), with the
venv's `seamlessflow` first on PATH; the default model is copied in already built (its warm start takes
minutes), where `up` finds and reuses it.
"""

from __future__ import annotations

import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

PASS_LINE = re.compile(r"^pass (\d+)/(\d+): mean reward ([\d.]+) over (\d+) sessions \(policy version (\d+)\)$")


@dataclass
class PoolRun:
    """One harness's scaffold and what `agent run` printed for it."""

    harness: str
    command: str
    means: dict[int, float] = field(default_factory=dict)  # pass (from 1) -> mean reward
    versions: dict[int, int] = field(default_factory=dict)  # pass (from 1) -> the policy version it ended on
    passes: int = 0
    spent_line: str = ""
    output: str = ""
    seconds: float = 0.0

    @property
    def first_and_last(self) -> tuple[float, float]:
        return self.means[1], self.means[self.passes]


def seamlessflow_env(broker_port: int | None) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    if broker_port is not None:
        env["SEAMLESSFLOW_BROKER_PORT"] = str(broker_port)
    return env


def stack_cpu_s(run_dir: Path) -> float:
    """CPU seconds of the stack's processes still running (and of the children they reaped)."""
    import psutil

    from seamlessflow.stack.processes import stack_processes

    total = 0.0
    for proc in stack_processes(run_dir):
        try:
            times = proc.cpu_times()
            total += times.user + times.system + times.children_user + times.children_system
        except (psutil.Error, OSError):  # gone meanwhile: not counted
            continue
    return total


def run_first(workdir: Path, model: Path, harnesses: list[str], demo: bool = True, broker_port: int | None = None,
              timeout_s: float = 1200, log: Callable[[str], None] = print,
              cpu: dict[str, float] | None = None) -> list[PoolRun]:
    """Up, init, the printed commands side by side until their passes are spent, down (always). `cpu` gets the
    stack's CPU seconds (`stack_cpu_s`, just before `down`) and those of the commands (agents included)."""
    env = seamlessflow_env(broker_port)
    shutil.copytree(model, workdir / ".seamlessflow" / "models" / "tiny", dirs_exist_ok=True)

    def sf(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
        return subprocess.run(["seamlessflow", *args], cwd=workdir, env=env, capture_output=True, text=True,
                              timeout=timeout)

    started = time.monotonic()
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    up = sf("up", "--detach", *([] if demo else ["--no-demo"]))
    try:
        if up.returncode != 0:
            raise RuntimeError(f"up failed: {up.stdout}{up.stderr}")
        log(f"stack healthy after {time.monotonic() - started:.0f} s")
        pools = [PoolRun(h, sf("init", h, "--harness", h).stdout.strip()) for h in harnesses]
        running = [(pool, subprocess.Popen(["bash", "-c", pool.command], cwd=workdir, env=env, text=True,
                                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT)) for pool in pools]
        began = time.monotonic()
        for pool, process in running:
            try:
                pool.output, _ = process.communicate(timeout=max(1.0, timeout_s - (time.monotonic() - began)))
            except subprocess.TimeoutExpired:
                process.terminate()
                pool.output = process.communicate(timeout=60)[0]
            pool.seconds = time.monotonic() - began
            read_passes(pool)
            log(f"{pool.harness}: {pool.means} on versions {pool.versions} in {pool.seconds:.0f} s; {pool.spent_line}")
        return pools
    finally:
        if cpu is not None:
            cpu["stack_cpu_s"] = stack_cpu_s(workdir / ".seamlessflow" / "run")
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpu["commands_cpu_s"] = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
        sf("down", timeout=300)


def read_passes(pool: PoolRun) -> None:
    for line in pool.output.splitlines():
        match = PASS_LINE.match(line.strip())
        if match:
            pool.means[int(match.group(1))] = float(match.group(3))
            pool.versions[int(match.group(1))] = int(match.group(5))
            pool.passes = int(match.group(2))
        elif "published passes are spent" in line:
            pool.spent_line = line.strip()

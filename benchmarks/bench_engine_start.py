"""A lean test engine's start and first call (`seamlessflow/testing/vllm_server.py`), with and without
TorchDynamo, alternating on the test's random tiny model: seconds until ready, then the first sampled call with
logprobs (what every proxy call asks) in seconds and CPU-seconds of the engine's processes.

    .venv/bin/python benchmarks/bench_engine_start.py [--rounds 2]

Why: -O0 leaves two vLLM helpers under torch.compile, built with Inductor's C++ compiler on an engine's first
call; the suite starts about forty engines.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import seamlessflow.testing.vllm_server as vllm_server  # noqa: E402
from seamlessflow.testing.models import build_random_tiny_model  # noqa: E402

CALL = {"model": "tiny", "prompt": [5, 17, 42, 99], "max_tokens": 8, "temperature": 1.0, "logprobs": 1}


def engine_cpu_s(engine: psutil.Process) -> float:
    return sum(sum(p.cpu_times()[:4]) for p in [engine, *engine.children(recursive=True)])


def one_engine(model: Path, work: Path, dynamo: bool) -> tuple[float, float, float]:
    """(seconds to ready, seconds and CPU-seconds of the first call)."""
    vllm_server.LEAN_ENGINE_ENV["TORCHDYNAMO_DISABLE"] = "0" if dynamo else "1"
    server = vllm_server.VllmServer(model, work / f"vllm-{time.monotonic_ns()}.log")
    began = time.monotonic()
    server.start()
    ready = time.monotonic() - began
    try:
        assert server.proc is not None
        engine = psutil.Process(server.proc.pid)
        cpu, began = engine_cpu_s(engine), time.monotonic()
        httpx.post(server.url + "/v1/completions", json=CALL, timeout=300).raise_for_status()
        return ready, time.monotonic() - began, engine_cpu_s(engine) - cpu
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-engine-"))
    model = build_random_tiny_model(work / "model")
    rows: dict[str, list[tuple[float, float, float]]] = {"TorchDynamo on": [], "TorchDynamo off": []}
    for _ in range(args.rounds):
        for name in rows:
            rows[name].append(one_engine(model, work, dynamo=name.endswith("on")))
    print(f"lean test engine, {args.rounds} rounds alternating, medians:")
    for name, values in rows.items():
        ready, call, cpu = (statistics.median(v[i] for v in values) for i in range(3))
        print(f"{name:>16}: ready after {ready:5.1f} s; first call {call:4.2f} s, {cpu:4.2f} CPU-s")


if __name__ == "__main__":
    main()

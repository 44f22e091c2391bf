"""Pause -> load -> resume time per weight-swap method, for the tiny model on a real vLLM-CPU engine.

Drives a `RolloutWorker` directly (no broker: the Kafka hop is not what is measured) with the same
commands the scheduler sends. Methods:
  reload+recompute  in-place reload, prefix cache reset (the default: correct logprobs afterwards)
  reload+keep-kv    in-place reload, old KV reused (faster, stale for repeated prefixes)
  restart           stop the engine, start it on the new directory
Target: <= 2 s for the whole pause -> load -> resume sequence.

    .venv/bin/python benchmarks/bench_weight_swap.py [--repeats 5] [--full]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from seamlessflow.messages import ControlCommand, new_id, now_ms
from seamlessflow.model import build_tiny_model
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.worker import RolloutWorker
from seamlessflow.testing.weights import write_new_version


class Driver:
    def __init__(self, worker: RolloutWorker):
        self.worker, self.epoch = worker, 0

    def send(self, command: str, **fields) -> float:
        self.epoch += 1
        ack = self.worker.handle(ControlCommand(new_id(), "bench", self.epoch, command, "bench", "bench", now_ms(), **fields))
        if ack.outcome != "ok":
            raise RuntimeError(f"{command}: {ack.outcome} {ack.reason}")
        return ack.duration_ms

    def swap(self, version: int, uri: str) -> tuple[float, float, float]:
        return (self.send("pause", mode="keep"), self.send("load_weights", weight_version=version, weight_uri=uri),
                self.send("resume"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--full", action="store_true", help="the full tiny model (default: the small test model)")
    parser.add_argument("-O", dest="level", type=int, default=0, help="vLLM optimization level (0: no compile)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-swap-"))
    model = build_tiny_model(root / "model", seed=0, small=not args.full, log=lambda _: None).path
    versions = [write_new_version(model, root / f"v{i}", seed=i).as_uri() for i in range(2, 4)]
    rows = []
    for label, methods, kv in (("reload+recompute", ["reload"], "recompute"), ("reload+keep-kv", ["reload"], "keep"),
                               ("restart", ["restart"], "recompute")):
        options = RolloutOptions(model=str(model), max_model_len=256, weight_load_methods=methods, kv_after_swap=kv,
                                 optimization_level=args.level)
        worker = RolloutWorker("bench", options, model, root / "logs")
        started = time.monotonic()
        worker.start()
        print(f"[{label}] engine up in {time.monotonic() - started:.1f} s", flush=True)
        driver = Driver(worker)
        repeats = 1 if label == "restart" else args.repeats
        try:
            samples = [driver.swap(2 + i % 2, versions[i % 2]) for i in range(repeats)]
        finally:
            worker.close()
        totals = [sum(s) for s in samples]
        rows.append((label, repeats, *(statistics.median(s[i] for s in samples) for i in range(3)), statistics.median(totals)))
    print(f"\n{'method':<18}{'n':>3}{'pause ms':>11}{'load ms':>11}{'resume ms':>11}{'total ms':>11}{'vs target 2 s':>15}")
    for label, n, pause, load, resume, total in rows:
        print(f"{label:<18}{n:>3}{pause:>11.0f}{load:>11.0f}{resume:>11.0f}{total:>11.0f}{total / 2000:>14.2f}x")
    base = rows[0][5]
    print("\nside by side: " + ", ".join(f"{label} {total / base:.1f}x" for label, *_, total in rows) + " (reload+recompute = 1.0)")


if __name__ == "__main__":
    main()

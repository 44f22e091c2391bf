"""The trainer's GPU paths, checked and measured by one command on a lent GPU machine; one table out.

Rows (all on one random-weight model built from a config, nothing downloaded: Qwen2.5-0.5B's shape on CUDA):
- tree vs flat: a GRPO group (G completions of C tokens on one P-token prompt; 8, 2048, 256 on CUDA) as a token
  tree (`trainer.tree`, merged-chain attention on CUDA's flash kernel, `trainer.tree_attention`) and as the
  padded flat batch, plain torch, in the training dtype (bf16 on CUDA): the loss and every gradient from
  the same weights (bf16: equal to a relative 3e-2, fp32 to 1e-4), then AdamW steps alternating round by
  round, the tree/flat step-time ratio (median) beside the ideal (tree positions / flat positions);
- ZeRO-2 bf16: `PolicyEngine` steps (infra/deepspeed/gpu_zero2_bf16.json, flat layout) on a synthetic GRPO
  batch: step time, MFU (`bench_trainer`'s model-FLOP count over the device's dense bf16 peak) and peak
  memory (CUDA max allocated);
- weight source after the step, ZeRO-2 and ZeRO-3: right after `train_step` returns (nothing synchronised),
  `DeviceBucketSource` is drained as vLLM's packed NCCL producer drains it (each packed buffer pulled and
  concatenated under a side stream of its own, two in turn; the broadcast left out), and its bytes are
  compared with the parameters read after a full synchronise (gathered under ZeRO-3).
A row that is a check says ok or FAIL; the exit status is 1 if any failed.

On a lent GPU machine (shared/gpu/README.md; vLLM is not there, the trainer side is): here
`bash ../shared/gpu/prepare.sh`, then the device tool with carry [".device"] and the command
    source .device/setup.sh && python benchmarks/gpu_smoke.py 2>&1 | tee $OUT/gpu_smoke.txt
(about 3-5 min on an H100, most of it building the model, DeepSpeed's fused Adam and the engines).
`--device cpu` is a dry run at tiny sizes (tiny model, G=4, P=32, C=8; DeepSpeed on gloo, torch's Adam), run
by the test suite (tests/benchmarks/test_gpu_smoke.py): it checks the script, not the GPU.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib.util
import json
import statistics
import sys
import tempfile
import time
import types
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from transformers import AutoModelForCausalLM

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_trainer  # noqa: E402  (beside this script)
import tree_vs_flat  # noqa: E402

from seamlessflow.core.batching import KeptGroup, TrajectorySample  # noqa: E402
from seamlessflow.core.token_tree import build_tree  # noqa: E402
from seamlessflow.trainer.model import TokenLogprobModel  # noqa: E402
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions  # noqa: E402
from seamlessflow.trainer.policy_engine import PolicyEngine, micro_batch_loss  # noqa: E402
from seamlessflow.trainer.samples import collate  # noqa: E402
from seamlessflow.trainer.tree import tree_batch  # noqa: E402

Row = tuple[str, str, str]  # what, figures, ok / FAIL / "" (a measurement)


@dataclass(frozen=True)
class Sizes:
    """What one run computes: the model's shape, the tree-vs-flat group and the ZeRO-2 batch."""

    shape: str
    group: int
    prompt: int
    completion: int
    groups: int
    group_size: int
    generated: int
    max_tokens: int
    bucket_mb: int


SIZES = {
    "cuda": Sizes("qwen2.5-0.5b", 8, 2048, 256, groups=4, group_size=8, generated=512, max_tokens=16384,
                  bucket_mb=256),
    "cpu": Sizes("tiny", 4, 32, 8, groups=2, group_size=2, generated=16, max_tokens=256, bucket_mb=1),
}


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cuda: the full run (one GPU); cpu: a dry run at tiny sizes")
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per measurement, after one warm-up")
    parser.add_argument("--peak-tflops", type=float, help="the device's dense peak, if bench_trainer knows none")
    return parser.parse_args(argv)


def ok(passed: bool) -> str:
    return "ok" if passed else "FAIL"


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


# -- tree vs flat --------------------------------------------------------------------------------------------


def backward(model: TokenLogprobModel, samples: list[TrajectorySample], as_tree: bool,
             device: torch.device) -> float:
    """One micro-batch's forward and backward (gradients zeroed first); its loss."""
    model.zero_grad()
    advantages, weights = torch.linspace(-1, 1, len(samples)), torch.ones(len(samples))
    total = sum(max(s.trained_tokens - s.loss_mask[0], 0) for s in samples)
    batch = tree_batch(samples) if as_tree else collate(samples)
    out, _ = micro_batch_loss(model, batch.to(device), advantages, weights, total, TrainerOptions().loss_config())
    out.loss.backward()
    return float(out.loss.detach())


def loss_and_grads(model: TokenLogprobModel, samples: list[TrajectorySample], as_tree: bool,
                   device: torch.device) -> tuple[float, list[torch.Tensor]]:
    """The loss and the parameters' gradients (float32 copies), from the model's weights now."""
    loss = backward(model, samples, as_tree, device)
    return loss, [p.grad.float().clone() for p in model.parameters() if p.grad is not None]


def relative_difference(got: list[torch.Tensor], want: list[torch.Tensor]) -> float:
    """norm(got - want) / norm(want) over all the tensors together (one global norm)."""
    diff = sum(float((g - w).pow(2).sum()) for g, w in zip(got, want, strict=True))
    return (diff / max(sum(float(w.pow(2).sum()) for w in want), 1e-30)) ** 0.5


def timed_steps(device: torch.device, rounds: int, steps: dict[str, Callable[[], object]]) -> dict[str, float]:
    """Median seconds of each step, alternating round by round (so load drifts hit all alike), after a
    warm-up round."""
    times: dict[str, list[float]] = {name: [] for name in steps}
    for round_ in range(rounds + 1):
        for name, step in steps.items():
            synchronize(device)
            start = time.perf_counter()
            step()
            synchronize(device)
            if round_:
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def tree_vs_flat_rows(model_dir: Path, device: torch.device, sizes: Sizes, rounds: int) -> list[Row]:
    """Equal loss and gradients, then the step-time ratio, of a GRPO group as a tree and flat."""
    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    hf: Any = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa")
    hf.to(device)
    model = TokenLogprobModel(hf.train())
    samples = tree_vs_flat.grpo_group(torch.Generator().manual_seed(1), hf.config.vocab_size, sizes.group,
                                      sizes.prompt, sizes.completion)
    (flat_loss, flat_grads), (tree_loss, tree_grads) = (loss_and_grads(model, samples, t, device)
                                                        for t in (False, True))
    tolerance = 3e-2 if dtype == torch.bfloat16 else 1e-4
    loss_error = abs(tree_loss - flat_loss) / max(abs(flat_loss), 1e-30)
    grad_error = relative_difference(tree_grads, flat_grads)
    del flat_grads, tree_grads
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-6)

    def step(as_tree: bool) -> None:
        backward(model, samples, as_tree, device)
        optimizer.step()

    seconds = timed_steps(device, rounds, {"flat": lambda: step(False), "tree": lambda: step(True)})
    tree = build_tree([s.tokens for s in samples])
    what = f"tree vs flat, G={sizes.group} P={sizes.prompt} C={sizes.completion} ({dtype})"
    return [
        (f"{what}: loss", f"flat {flat_loss:.5f}, tree {tree_loss:.5f} (relative {loss_error:.1e})",
         ok(loss_error <= tolerance)),
        (f"{what}: gradients", f"norm(tree - flat) / norm(flat) = {grad_error:.1e} (tolerance {tolerance:.0e})",
         ok(grad_error <= tolerance)),
        (f"{what}: step time", f"flat {seconds['flat']:.3f} s, tree {seconds['tree']:.3f} s: ratio "
         f"{seconds['tree'] / seconds['flat']:.3f} (ideal {tree.size / tree.flat_size:.3f})", ""),
    ]


# -- ZeRO-2 MFU and the weight source --------------------------------------------------------------------------


def ds_config(device: torch.device, stage: int) -> dict[str, Any]:
    """The shipped bf16 ZeRO-2 config, or the same at ZeRO-3 (16-bit gather on save, as every shipped ZeRO-3
    config has); on CPU with torch's Adam (DeepSpeed's CPU Adam would be compiled first)."""
    config = json.loads((DEEPSPEED_CONFIGS / "gpu_zero2_bf16.json").read_text())
    if stage == 3:
        config["zero_optimization"] = {"stage": 3, "stage3_gather_16bit_weights_on_model_save": True}
    if device.type == "cpu":
        config["optimizer"]["params"]["torch_adam"] = True
    return config


def synthetic_groups(sizes: Sizes, vocab: int) -> list[KeptGroup]:
    args = argparse.Namespace(groups=sizes.groups, group_size=sizes.group_size, prompt=sizes.prompt // 4,
                              generated=sizes.generated, spread=0.5)
    return bench_trainer.synthetic_batch(args, vocab)


def new_engine(model_dir: Path, device: torch.device, stage: int, sizes: Sizes) -> PolicyEngine:
    memory = TrainerOptions(max_tokens_per_micro_batch=sizes.max_tokens, tree=False, packing=False).memory_config()
    return PolicyEngine(model_dir, ds_config(device, stage), memory=memory)


def mfu_row(engine: PolicyEngine, groups: list[KeptGroup], rounds: int, peak_tflops: float | None) -> Row:
    """Step time, MFU and peak memory of ZeRO-2 bf16 steps (see bench_trainer for the FLOP count)."""
    device = engine.engine.device
    engine.train_step(groups)  # warm-up
    runs = [bench_trainer.timed(device, lambda: engine.train_step(groups)) for _ in range(rounds)]
    seconds, peak = statistics.median(r[0] for r in runs), max(r[1] for r in runs)
    flops = bench_trainer.step_flops(engine.module, groups)
    peak_flops, note = bench_trainer.peak_flops(device, peak_tflops)
    tokens = sum(len(s.tokens) for g in groups for s in g.samples)
    return (f"ZeRO-2 bf16 step ({tokens} tokens)", f"{seconds:.3f} s, MFU {flops / seconds / peak_flops:.1%} of "
            f"{note}, peak memory {peak / 2**30:.2f} GiB", "")


def device_source_class() -> Any:
    """`weights.device_source.DeviceBucketSource`. It takes two names from vLLM (`ParamMeta`, `WeightSource`);
    vLLM is not on the GPU image and takes about a minute to import on a small machine, so unless it is
    imported already the module is run under stand-ins for those two, and `sys.modules` is left as it was."""
    if "vllm.distributed.weight_transfer.base" in sys.modules:
        from seamlessflow.weights.device_source import DeviceBucketSource
        return DeviceBucketSource
    names = ("vllm", "vllm.distributed", "vllm.distributed.weight_transfer", "vllm.distributed.weight_transfer.base")
    saved = {name: sys.modules.get(name) for name in names}
    stand_ins = {name: types.ModuleType(name) for name in names}
    base: Any = stand_ins[names[-1]]
    base.ParamMeta = lambda name, dtype, shape: (name, dtype, shape)
    base.WeightSource = object
    sys.modules.update(stand_ins)
    try:
        spec = importlib.util.find_spec("seamlessflow.weights.device_source")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        for name, old in saved.items():
            if old is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = old
    return module.DeviceBucketSource


def pull(pairs: Iterator[tuple[str, torch.Tensor]], buffer_bytes: int) -> torch.Tensor | None:
    """One packed buffer as vLLM's `pack_tensors` makes it: tensors pulled until past ``buffer_bytes``,
    joined as bytes (None when the source is done)."""
    parts: list[torch.Tensor] = []
    size = 0
    for _, tensor in pairs:
        parts.append(tensor.contiguous().view(-1).view(torch.uint8))
        size += parts[-1].numel()
        if size > buffer_bytes:
            break
    return torch.cat(parts) if parts else None


def drain_like_vllm(source: Iterable[tuple[str, torch.Tensor]], device: torch.device,
                    buffer_bytes: int) -> torch.Tensor:
    """The source's bytes in order, pulled and packed as `packed_nccl_broadcast_producer` does: each buffer
    under a side stream of its own, two in turn, a stream synchronised before its next buffer; on the host."""
    streams = [torch.cuda.Stream(device) for _ in range(2)] if device.type == "cuda" else []
    pairs, packs = iter(source), list[torch.Tensor]()
    while True:
        stream = streams[len(packs) % 2] if streams else None
        if stream is not None:
            stream.synchronize()
        with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
            packed = pull(pairs, buffer_bytes)
        if packed is None:
            break
        packs.append(packed)
    synchronize(device)
    return torch.cat([p.cpu() for p in packs])


def parameter_bytes(engine: PolicyEngine) -> torch.Tensor:
    """The module's parameters as bytes on the host, in order, read after a full synchronise (gathered
    whole under ZeRO-3)."""
    params = list(engine.module.parameters())
    synchronize(engine.engine.device)
    gather = contextlib.nullcontext()
    if engine.engine.zero_optimization_stage() == 3:
        import deepspeed
        gather = deepspeed.zero.GatheredParameters(params)
    with gather:
        return torch.cat([p.detach().contiguous().view(-1).view(torch.uint8).cpu() for p in params])


def source_row(engine: PolicyEngine, groups: list[KeptGroup], bucket_mb: int) -> Row:
    """The device weight source drained right after a step, against the parameters."""
    engine.train_step(groups)
    source = device_source_class()(engine.module, bucket_mb << 20)
    sent = drain_like_vllm(source, engine.engine.device, max(bucket_mb << 19, 1))
    want = parameter_bytes(engine)
    same = sent.shape == want.shape and torch.equal(sent, want)
    stage = engine.engine.zero_optimization_stage()
    return (f"weight source right after the step, ZeRO-{stage}",
            f"{sent.numel() / 2**20:.1f} MiB sent, {want.numel() / 2**20:.1f} MiB of parameters, "
            f"{'bytes equal' if same else 'bytes differ'}", ok(same))


def engine_rows(model_dir: Path, device: torch.device, sizes: Sizes, args: argparse.Namespace) -> list[Row]:
    """MFU and the weight source under ZeRO-2, then the weight source under ZeRO-3 (one engine at a time)."""
    rows = []
    for stage in (2, 3):
        engine = new_engine(model_dir, device, stage, sizes)
        config: Any = engine.module.config
        groups = synthetic_groups(sizes, config.vocab_size)
        if stage == 2:
            rows.append(mfu_row(engine, groups, args.rounds, args.peak_tflops))
        rows.append(source_row(engine, groups, sizes.bucket_mb))
        del engine
        release(device)
    return rows


def release(device: torch.device) -> None:
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


# -- the table -----------------------------------------------------------------------------------------------


def table(rows: list[Row]) -> str:
    widths = [max(len(r[i]) for r in [("check", "figures", "result"), *rows]) for i in range(3)]
    lines = [" | ".join(c.ljust(w) for c, w in zip(r, widths, strict=True))
             for r in [("check", "figures", "result"), *rows]]
    return "\n".join([lines[0], "-" * len(lines[0]), *lines[1:]])


def header(device: torch.device, sizes: Sizes) -> str:
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU (dry run)"
    return (f"gpu_smoke: {name}, torch {torch.__version__}, model {sizes.shape} (random weights), "
            f"torch threads {torch.get_num_threads()}")


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("no CUDA device: run on a lent GPU machine, or --device cpu for the dry run")
    device = torch.device(args.device, 0) if args.device == "cuda" else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
    sizes = SIZES[args.device]
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-smoke-") as tmp:
        model_dir = bench_trainer.build_model(Path(tmp) / "model", sizes.shape)
        rows = tree_vs_flat_rows(model_dir, device, sizes, args.rounds)
        release(device)
        rows += engine_rows(model_dir, device, sizes, args)
    print(header(device, sizes))
    print(table(rows))
    print(f"total {time.perf_counter() - start:.0f} s")
    return 1 if any(r[2] == "FAIL" for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())

"""Trainer step: packed vs padded micro-batches under DeepSpeed, a plain torch step, and publication time.

All modes train the same synthetic GRPO batch (PPO-clip on recorded logprobs, token-level) with the same
token budget, alternating round by round in one process, so their ratios hold on a noisy machine:
- `deepspeed packed` / `deepspeed padded`: `PolicyEngine.train_step` with packing on / off;
- `plain torch`: the same micro-batches (padded) and loss, torch AdamW, no DeepSpeed, batch on the device.
Publication, timed each round: a weight version written synchronously (HF safetensors), the same version
through the trainer's background writer (only the host snapshot stays on the step's path; the write
overlaps the next round), and a DeepSpeed checkpoint (every `checkpoint_every` versions in the trainer).
`--ranks N` re-runs the benchmark under torch's launcher with N data-parallel ranks (gloo on CPU): the
leader's batch is shared out by tokens as in the trainer; the plain-torch mode runs only with one rank.

FLOPs per step (what MFU counts): 6·N·T + 6·L·d·ΣS², with N the matmul parameters (all parameters but
the input embedding, plus the LM head's V·H when it is tied to it), T the real tokens of the step (no
padding), L layers, d = attention heads × head dim, S each sequence's length: causal attention (QKᵀ and
AV over half the S×S scores, 2·S²·d forward per layer) times 3 for forward + backward. Recomputation
under activation checkpointing and padding are not counted (model FLOPs, not hardware FLOPs).
MFU = FLOPs / step time / peak: on CUDA the dense bf16 peak of the GPU (H100/H200 989 TFLOP/s, A100 312),
on CPU cores × 32 fp32 FLOP/cycle (two AVX2 FMA units) × the clock in /proc/cpuinfo; `--peak-tflops`
overrides. Peak memory: CUDA max allocated during the mode's steps; on CPU the process RSS sampled every
5 ms during them (all modes share one process, so it includes the other modes' resident memory).

Usage: python benchmarks/bench_trainer.py [--model HF_DIR | --shape tiny|qwen2.5-0.5b] [--groups 4]
       [--group-size 4] [--prompt 64] [--generated 192] [--spread 0.75] [--max-tokens N]
       [--activation-checkpointing] [--attn sdpa|flash_attention_2] [--deepspeed CONFIG.json] [--rounds 3]
       [--peak-tflops X] [--ranks N] [--checkpoint-every K] [--layout auto|tree|flat]
       python benchmarks/bench_trainer.py --tree [--rounds 3] [--tree-group 8 --tree-prompt 2048 ...]
       (tree vs flat steps: benchmarks/tree_vs_flat.py)
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from seamlessflow.core.batching import KeptGroup, TrajectorySample
from seamlessflow.core.losses import group_relative_advantages
from seamlessflow.trainer.launch import under_launcher
from seamlessflow.trainer.model import TokenLogprobModel, training_dtype
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS, TrainerOptions
from seamlessflow.trainer.policy_engine import PolicyEngine, micro_batch_loss
from seamlessflow.trainer.samples import collate
from seamlessflow.weights.files import WeightWriter, save_weights
from seamlessflow.weights.snapshot import host_snapshot

sys.path.insert(0, str(Path(__file__).resolve().parent))
import tree_vs_flat  # noqa: E402  (beside this script)

SHAPES = {
    "tiny": dict(vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=2, num_attention_heads=2,
                 num_key_value_heads=1, head_dim=64),
    "qwen2.5-0.5b": dict(vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24,
                         num_attention_heads=14, num_key_value_heads=2, head_dim=64),
}
GPU_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0}


def build_model(path: Path, shape: str) -> Path:
    torch.manual_seed(0)
    config = Qwen2Config(**SHAPES[shape], max_position_embeddings=32768, tie_word_embeddings=True, pad_token_id=0)
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def synthetic_batch(args, vocab: int) -> list[KeptGroup]:
    gen = torch.Generator().manual_seed(1)
    out = []
    for g in range(args.groups):
        samples = []
        for i in range(args.group_size):
            low = max(1, round(args.generated * (1 - args.spread)))
            generated = int(torch.randint(low, args.generated + 1, (1,), generator=gen))
            tokens = torch.randint(1, vocab, (args.prompt + generated,), generator=gen).tolist()
            mask = [0] * args.prompt + [1] * generated
            samples.append(TrajectorySample(f"g{g}s{i}", f"g{g}", f"t{g}", tuple(tokens), tuple(mask),
                                            tuple(-5.0 * m for m in mask), tuple(0 if m else -1 for m in mask),
                                            reward=float(i % 2)))
        out.append(KeptGroup(f"g{g}", f"t{g}", samples, [1.0] * args.group_size))
    return out


def plain_step(model, optimizer, groups: list[KeptGroup], plan: list[list[int]], device) -> None:
    """The same step without DeepSpeed: torch AdamW, manual accumulation, padded micro-batches."""
    samples = [s for g in groups for s in g.samples]
    index = torch.tensor([i for i, g in enumerate(groups) for _ in g.samples])
    adv = group_relative_advantages(torch.tensor([s.reward for s in samples]), index)
    weights = torch.ones(len(samples))
    total = sum(max(s.trained_tokens - s.loss_mask[0], 0) for s in samples)
    for chosen in plan:
        batch = collate([samples[i] for i in chosen]).to(device)
        out, _ = micro_batch_loss(model, batch, adv[chosen], weights[chosen], total, TrainerOptions().loss_config())
        out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()


def step_flops(model, groups: list[KeptGroup]) -> float:
    config = model.config
    embedding = config.vocab_size * config.hidden_size
    params = sum(p.numel() for p in model.parameters())  # tied head counted once: it is the embedding
    matmul = params - embedding + (embedding if config.tie_word_embeddings else 0)
    lengths = [len(s.tokens) for g in groups for s in g.samples]
    d_attn = config.num_attention_heads * getattr(config, "head_dim", config.hidden_size // config.num_attention_heads)
    return 6 * matmul * sum(lengths) + 6 * config.num_hidden_layers * d_attn * sum(n * n for n in lengths)


def peak_flops(device: torch.device, override: float | None) -> tuple[float, str]:
    if override:
        return override * 1e12, f"{override} TFLOP/s (given)"
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
        tflops = next((v for k, v in GPU_PEAK_TFLOPS.items() if k in name), None)
        if tflops is None:
            raise SystemExit(f"no peak known for {name}: pass --peak-tflops")
        return tflops * 1e12, f"{tflops} TFLOP/s dense bf16 ({name})"
    mhz = max(float(line.split(":")[1]) for line in open("/proc/cpuinfo") if line.startswith("cpu MHz"))
    cores = len(os.sched_getaffinity(0))
    return cores * 32 * mhz * 1e6, f"{cores} cores x 32 fp32 FLOP/cycle x {mhz:.0f} MHz"


class PeakMemory:
    """Peak bytes while the block runs: CUDA max allocated, else the process RSS sampled every 5 ms."""

    def __init__(self, device: torch.device):
        self.device, self.peak, self._stop = device, 0, threading.Event()

    def __enter__(self):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
        else:
            self._stop.clear()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        page = os.sysconf("SC_PAGE_SIZE")
        while not self._stop.wait(0.005):
            with open("/proc/self/statm") as statm:
                self.peak = max(self.peak, int(statm.read().split()[1]) * page)

    def __exit__(self, *exc):
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
            self.peak = max(self.peak, torch.cuda.max_memory_allocated(self.device))
        else:
            self._stop.set()
            self._thread.join()


def timed(device, fn) -> tuple[float, int]:
    with PeakMemory(device) as memory:
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        elapsed = time.perf_counter() - start
    return elapsed, memory.peak


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--generated", type=int, default=192, help="longest generated part")
    parser.add_argument("--spread", type=float, default=0.75, help="generated lengths uniform in [(1-s)*g, g]")
    parser.add_argument("--max-tokens", type=int, help="max_tokens_per_micro_batch (default: DeepSpeed's "
                                                       "train_micro_batch_size_per_gpu sequences)")
    parser.add_argument("--activation-checkpointing", action="store_true")
    parser.add_argument("--attn", help="attn_implementation (default transformers': sdpa)")
    parser.add_argument("--deepspeed", default=str(DEEPSPEED_CONFIGS / "cpu_zero1.json"))
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--peak-tflops", type=float)
    parser.add_argument("--ranks", type=int, default=1, help="data-parallel ranks (torch's launcher)")
    parser.add_argument("--checkpoint-every", type=int, default=1, help="versions per checkpoint (amortised)")
    parser.add_argument("--layout", choices=("auto", "tree", "flat"), default="auto",
                        help="trainer.tree: auto (null: a micro-batch trains as a tree where the FLOP rule says it "
                             "pays, planned by shared prefix), tree (true) or flat (false: planned by length)")
    tree_vs_flat.add_arguments(parser)
    args = parser.parse_args()
    if args.tree:
        return tree_vs_flat.main(args)
    if args.ranks > 1 and not under_launcher():
        os.execv(sys.executable, [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                  f"--nproc-per-node={args.ranks}", *sys.argv])
    tmp = Path(tempfile.mkdtemp(prefix="bench-trainer-"))
    model_dir = Path(args.model) if args.model else build_model(tmp / "model", args.shape)
    ds_config = json.loads(Path(args.deepspeed).read_text())
    memory = TrainerOptions(max_tokens_per_micro_batch=args.max_tokens, packing=True,
                            activation_checkpointing=args.activation_checkpointing, attn_implementation=args.attn,
                            tree={"auto": None, "tree": True, "flat": False}[args.layout]).memory_config()
    engine = PolicyEngine(model_dir, ds_config, memory=memory)
    device, leader, world = engine.engine.device, engine.ranks.leader, engine.ranks.world
    plain = AutoModelForCausalLM.from_pretrained(model_dir, dtype=training_dtype(ds_config),
                                                 attn_implementation=args.attn).to(device)
    if args.activation_checkpointing:
        plain.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    plain_model = TokenLogprobModel(plain.train(), memory.logprob_chunk_tokens)
    optimizer = torch.optim.AdamW(plain.parameters(), lr=1e-6)
    groups = synthetic_batch(args, plain.config.vocab_size)
    samples = [s for g in groups for s in g.samples]
    packing_works = engine.packing
    modes = {
        "deepspeed packed": lambda: engine.train_step(groups if leader else None),
        "deepspeed padded": lambda: engine.train_step(groups if leader else None),
    }
    if world == 1:
        modes["plain torch (padded)"] = lambda: plain_step(plain_model, optimizer, groups, padded_plan, device)
    engine.packing = False
    padded_plan = engine.plan(samples)
    times = {mode: [] for mode in modes}
    peaks = dict.fromkeys(modes, 0)
    publish: dict[str, list[float]] = {"sync": [], "background": [], "checkpoint": []}
    writer = WeightWriter()
    for round_ in range(args.rounds + 1):  # round 0 warms every mode up
        for mode, run in modes.items():
            engine.packing = packing_works and mode == "deepspeed packed"
            elapsed, peak = timed(device, run)
            if round_:
                times[mode].append(elapsed)
                peaks[mode] = max(peaks[mode], peak)
        if round_:
            time_publication(engine, writer, tmp, model_dir, round_, publish)
    writer.drain()
    if not leader:
        return

    flops, (peak, peak_note) = step_flops(plain, groups), peak_flops(device, args.peak_tflops)
    real = sum(len(s.tokens) for s in samples)
    lengths = [len(s.tokens) for s in samples]
    engine.packing = packing_works
    packed_plan = engine.plan(samples)
    print(
        f"model {sum(p.numel() for p in plain.parameters()) / 1e6:.2f} M params ({args.model or args.shape}), "
        f"{training_dtype(ds_config)}, {plain.config._attn_implementation}, device {device}, "
        f"DeepSpeed {Path(args.deepspeed).name}, "
        f"ZeRO-{engine.engine.zero_optimization_stage()}, activation checkpointing {args.activation_checkpointing}"
    )
    print(f"batch {args.groups}x{args.group_size} sequences of {min(lengths)}-{max(lengths)} tokens ({real} tokens), "
          f"token budget {args.max_tokens}, micro-batches: packed {len(packed_plan)}"
          f"{'' if packing_works else ' (model failed the packing probe: padded)'}, padded {len(padded_plan)} "
          f"({sum(len(b) * max(lengths[i] for i in b) for b in padded_plan) / real - 1:.0%} padding); "
          f"rounds {args.rounds}")
    print(f"FLOPs/step {flops:.3g} = 6*N*T + 6*L*d*sum(S^2); peak {peak_note}")
    print(f"{'':22} {'step s':>8} {'tokens/s':>10} {'TFLOP/s':>8} {'MFU':>6} {'peak mem GiB':>13}")
    for mode in modes:
        step = statistics.median(times[mode])
        print(f"{mode:22} {step:8.3f} {real / step:10.0f} {flops / step / 1e12:8.4f} {flops / step / peak:6.1%} "
              f"{peaks[mode] / 2**30:13.3f}")
    packed, padded = (statistics.median(times[m]) for m in ("deepspeed packed", "deepspeed padded"))
    sync, background, checkpoint = (statistics.median(publish[k]) for k in ("sync", "background", "checkpoint"))
    on_path = background + checkpoint / args.checkpoint_every
    print(f"ranks {world}; publication on the step's critical path, per version: weights written in the step "
          f"{sync:.3f} s ({sync / packed:.2f} of a packed step); with the background writer {background:.3f} s "
          f"({background / packed:.2f}); checkpoint {checkpoint:.3f} s every {args.checkpoint_every} version(s) "
          f"-> {on_path:.3f} s = {on_path / packed:.1%} of a packed step")
    ratios = f"ratios: padded/packed step time {padded / packed:.2f}"
    if "plain torch (padded)" in times:
        ratios += f", deepspeed packed/plain torch {packed / statistics.median(times['plain torch (padded)']):.2f}"
    print(ratios)


def time_publication(engine, writer: WeightWriter, tmp: Path, model_dir: Path, round_: int,
                     publish: dict[str, list[float]]) -> None:
    """One version written in the step, one through the background writer, and a checkpoint, all ranks
    taking part (ZeRO-3's gather and DeepSpeed's checkpoint are collectives); the leader writes."""
    leader = engine.ranks.leader
    start = time.perf_counter()
    state = engine.state_dict_for_export()
    if leader:
        save_weights(engine.module, tmp / "weights", 2 * round_, model_dir, state)
    publish["sync"].append(time.perf_counter() - start)
    start = time.perf_counter()
    state = engine.state_dict_for_export()
    if leader:
        snapshot = host_snapshot(state or engine.module.state_dict())
        version = 2 * round_ + 1
        writer.submit(
            version, round_, lambda: save_weights(engine.module, tmp / "weights", version, model_dir, snapshot)
        )
    publish["background"].append(time.perf_counter() - start)
    start = time.perf_counter()
    engine.save_checkpoint(tmp / "checkpoints", f"step{round_}", {"sf_step": round_})
    publish["checkpoint"].append(time.perf_counter() - start)


if __name__ == "__main__":
    main()

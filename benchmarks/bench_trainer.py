"""Trainer throughput on CPU: trained tokens/s of a DeepSpeed step vs a plain torch step, and publish time.

Both steps run the same loss (PPO-clip on recorded logprobs, token-level) on the same synthetic GRPO
batch with the same micro-batch size, alternating round by round in one process, so the ratio holds on a
noisy machine. Publishing = HF safetensors save of a new version + DeepSpeed checkpoint (model, optimizer,
step, offsets), which is what the trainer does before announcing a WeightVersion.

Usage: python benchmarks/bench_trainer.py [--model HF_DIR] [--groups 4] [--group-size 4] [--prompt 64]
       [--generated 192] [--rounds 3]
Without --model it builds a random Qwen2 model the size of the project's tiny model (hidden 128, 2 layers).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from seamlessflow.core.batching import KeptGroup, TrajectorySample
from seamlessflow.core.losses import group_relative_advantages, ppo_clip_loss, token_logprobs
from seamlessflow.training.config import DEEPSPEED_CONFIGS
from seamlessflow.training.engine import PolicyEngine
from seamlessflow.training.samples import collate
from seamlessflow.training.weights import save_weights


def build_model(path: Path) -> Path:
    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=512, hidden_size=128, intermediate_size=384, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=64, max_position_embeddings=1024,
                         tie_word_embeddings=True, pad_token_id=0)
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def synthetic_batch(groups: int, size: int, prompt: int, generated: int, vocab: int) -> list[KeptGroup]:
    gen = torch.Generator().manual_seed(1)
    out = []
    for g in range(groups):
        samples = []
        for i in range(size):
            tokens = torch.randint(1, vocab, (prompt + generated,), generator=gen).tolist()
            mask = [0] * prompt + [1] * generated
            samples.append(TrajectorySample(f"g{g}s{i}", f"g{g}", f"t{g}", tuple(tokens), tuple(mask),
                                            tuple(-5.0 * m for m in mask), tuple(0 if m else -1 for m in mask),
                                            reward=float(i % 2)))
        out.append(KeptGroup(f"g{g}", f"t{g}", samples, [1.0] * size))
    return out


def plain_step(model, optimizer, groups: list[KeptGroup], micro: int) -> None:
    """The same step without DeepSpeed: torch AdamW, manual accumulation."""
    samples = [s for g in groups for s in g.samples]
    index = torch.tensor([i for i, g in enumerate(groups) for _ in g.samples])
    adv = group_relative_advantages(torch.tensor([s.reward for s in samples]), index)
    total = sum(s.trained_tokens for s in samples)
    for begin in range(0, len(samples), micro):
        batch = collate(samples[begin:begin + micro])
        logits = model(input_ids=batch.tokens, attention_mask=batch.attention_mask).logits
        out = ppo_clip_loss(token_logprobs(logits, batch.tokens), batch.logprobs, adv[begin:begin + micro],
                            batch.loss_mask, normaliser=total)
        out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    optimizer.step()
    optimizer.zero_grad()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model")
    parser.add_argument("--groups", type=int, default=4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=64)
    parser.add_argument("--generated", type=int, default=192)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--deepspeed", default=str(DEEPSPEED_CONFIGS / "cpu_zero1.json"))
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-trainer-"))
    model_dir = Path(args.model) if args.model else build_model(tmp / "model")
    ds_config = json.loads(Path(args.deepspeed).read_text())
    engine = PolicyEngine(model_dir, ds_config)
    plain = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).to(engine.engine.device)
    optimizer = torch.optim.AdamW(plain.parameters(), lr=1e-5)
    groups = synthetic_batch(args.groups, args.group_size, args.prompt, args.generated, plain.config.vocab_size)
    trained = sum(g.trained_tokens for g in groups)
    total = sum(len(s.tokens) for g in groups for s in g.samples)
    micro = engine.engine.train_micro_batch_size_per_gpu()
    engine.train_step(groups)  # warm-up both
    plain_step(plain, optimizer, groups, micro)
    ds_times, plain_times, save_times, ckpt_times = [], [], [], []
    for version in range(1, args.rounds + 1):
        start = time.perf_counter()
        engine.train_step(groups)
        ds_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        plain_step(plain, optimizer, groups, micro)
        plain_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        save_weights(engine.module, tmp / "weights", version, model_dir, engine.state_dict_for_export())
        save_times.append(time.perf_counter() - start)
        start = time.perf_counter()
        engine.save_checkpoint(tmp / "checkpoints", f"step{version}", {"sf_step": version})
        ckpt_times.append(time.perf_counter() - start)
    ds, pl = statistics.median(ds_times), statistics.median(plain_times)
    save, ckpt = statistics.median(save_times), statistics.median(ckpt_times)
    params = sum(p.numel() for p in plain.parameters())
    print(f"model {params / 1e6:.2f} M params, device {engine.engine.device}, batch {args.groups}x{args.group_size} "
          f"sequences of {args.prompt}+{args.generated} tokens, micro-batch {micro}, rounds {args.rounds}")
    print(f"{'':28} {'step s':>8} {'trained tok/s':>14} {'all tok/s':>10}")
    print(f"{'deepspeed step':28} {ds:8.3f} {trained / ds:14.0f} {total / ds:10.0f}")
    print(f"{'plain torch step':28} {pl:8.3f} {trained / pl:14.0f} {total / pl:10.0f}")
    print(f"{'publish: save HF weights':28} {save:8.3f}")
    print(f"{'publish: checkpoint':28} {ckpt:8.3f}")
    print(f"ratios: deepspeed/plain step time {ds / pl:.2f}, publish (save + checkpoint) / step {(save + ckpt) / ds:.2f}")


if __name__ == "__main__":
    main()

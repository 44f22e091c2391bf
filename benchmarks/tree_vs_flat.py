"""Tree vs flat training steps, side by side in one process (`bench_trainer.py --tree`).

Two batches, each trained as a token tree (`seamlessflow.trainer.tree`: every shared prefix once, attended
chain by chain, `seamlessflow.trainer.tree_attention`) and flat (one padded row per sequence), alternating
round by round, plain torch AdamW (the model-side tree path; the trainer's DeepSpeed engine runs the same one):
- (a) a GRPO group: G completions of C tokens on one P-token prompt (default G=8, P=2048, C=256);
- (b) multi-turn sessions of 16 turns (a tool output and a generation each) with one rewrite each, which
  forks the session: two trajectories per session sharing the history before the rewrite.
Printed per case: step time (median of the rounds), trained tokens/s and the step's peak RSS above its
start, the measured tree/flat step-time ratio, and the ideal ratio from the token arithmetic (tree positions /
flat positions). The model is the tiny shape scaled to a few million parameters (`--tree-hidden`,
`--tree-layers`).
"""

from __future__ import annotations

import statistics
import threading
import time

import psutil
import torch
from transformers import Qwen2Config, Qwen2ForCausalLM

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.core.token_tree import build_tree, tree_pays
from seamlessflow.trainer.model import TokenLogprobModel
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.policy_engine import micro_batch_loss
from seamlessflow.trainer.samples import collate
from seamlessflow.trainer.tree import tree_batch


def sample(name: str, tokens: list[int], mask: list[int]) -> TrajectorySample:
    return TrajectorySample(name, "g", "t", tuple(tokens), tuple(mask), tuple(-2.0 * m for m in mask),
                            tuple(0 if m else -1 for m in mask), 0.0)


def grpo_group(gen: torch.Generator, vocab: int, group: int, prompt: int, completion: int) -> list[TrajectorySample]:
    shared = torch.randint(1, vocab, (prompt,), generator=gen).tolist()
    return [sample(f"c{i}", shared + torch.randint(1, vocab, (completion,), generator=gen).tolist(),
                   [0] * prompt + [1] * completion) for i in range(group)]


def rewritten_sessions(gen: torch.Generator, vocab: int, sessions: int, turns: int = 16, tool: int = 64,
                       generated: int = 32) -> list[TrajectorySample]:
    """Each session forks once, at a random turn: the branch before the rewrite and the one after it."""
    out = []
    for s in range(sessions):
        tokens, mask = [], []
        for _ in range(turns):
            tokens += torch.randint(1, vocab, (tool + generated,), generator=gen).tolist()
            mask += [0] * tool + [1] * generated
        fork = int(torch.randint(turns // 4, 3 * turns // 4, (1,), generator=gen)) * (tool + generated)
        rewrite = torch.randint(1, vocab, (len(tokens) - fork,), generator=gen).tolist()
        out += [sample(f"s{s}a", tokens, mask), sample(f"s{s}b", tokens[:fork] + rewrite, mask)]
    return out


def step(model, optimizer, samples: list[TrajectorySample], tree: bool) -> None:
    advantages, weights = torch.linspace(-1, 1, len(samples)), torch.ones(len(samples))
    total = sum(max(s.trained_tokens - s.loss_mask[0], 0) for s in samples)
    batch = tree_batch(samples) if tree else collate(samples)
    out, _ = micro_batch_loss(model, batch, advantages, weights, total, TrainerOptions().loss_config())
    out.loss.backward()
    optimizer.step()
    optimizer.zero_grad()


class StepMemory:
    """Peak RSS above the RSS at the start of the block, sampled every 5 ms (the step's own working memory:
    activations, the mask, gradients' transient buffers), in MiB."""

    def __enter__(self) -> StepMemory:
        self._process = psutil.Process()
        self.base = self.peak = self._process.memory_info().rss
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, self._process.memory_info().rss)

    def __exit__(self, *_) -> None:
        self._stop.set()
        self._thread.join()

    @property
    def mib(self) -> float:
        return (self.peak - self.base) / 2**20


def run_case(name: str, samples: list[TrajectorySample], model, optimizer, rounds: int) -> None:
    tree = build_tree([s.tokens for s in samples])
    trained = sum(max(s.trained_tokens - s.loss_mask[0], 0) for s in samples)
    times: dict[bool, list[float]] = {False: [], True: []}
    peaks: dict[bool, list[float]] = {False: [], True: []}
    step(model, optimizer, samples, True)  # warm-up (allocator, kernels)
    for _ in range(rounds):
        for as_tree in (False, True):
            with StepMemory() as memory:
                start = time.perf_counter()
                step(model, optimizer, samples, as_tree)
                times[as_tree].append(time.perf_counter() - start)
            peaks[as_tree].append(memory.mib)
    flat_s, tree_s = statistics.median(times[False]), statistics.median(times[True])
    config = model.causal_lm.config
    matmul = sum(p.numel() for p in model.parameters())  # the tied head does the embedding's multiply-adds
    pays = tree_pays(tree, matmul, config.num_hidden_layers, config.num_attention_heads * config.head_dim)
    print(f"{name}: {len(samples)} sequences, {tree.flat_size} flat positions, {tree.size} tree positions; "
          f"the FLOP rule (core.token_tree.tree_pays) picks {'tree' if pays else 'flat'}")
    for label, seconds, peak in (("flat", flat_s, max(peaks[False])), ("tree", tree_s, max(peaks[True]))):
        print(f"  {label}: step {seconds:.2f} s, {trained / seconds:.0f} trained tokens/s, "
              f"peak RSS above the step's start {peak:.0f} MiB")
    print(f"  tree/flat step time {tree_s / flat_s:.3f} (per round: "
          f"{', '.join(f'{t / f:.3f}' for t, f in zip(times[True], times[False], strict=True))}); "
          f"ideal (token arithmetic) {tree.size / tree.flat_size:.3f}")


def main(args) -> None:
    torch.manual_seed(0)
    config = Qwen2Config(
        vocab_size=512,
        hidden_size=args.tree_hidden,
        intermediate_size=4 * args.tree_hidden,
        num_hidden_layers=args.tree_layers,
        num_attention_heads=args.tree_hidden // 64,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        pad_token_id=0,
        attn_implementation="sdpa",
    )
    hf = Qwen2ForCausalLM(config)
    params = sum(p.numel() for p in hf.parameters())
    print(
        f"model: hidden {args.tree_hidden}, {args.tree_layers} layers, {params / 1e6:.1f} M parameters; "
        f"torch threads {torch.get_num_threads()}; plain torch AdamW, one micro-batch per step"
    )
    model = TokenLogprobModel(hf)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    gen = torch.Generator().manual_seed(1)
    run_case(
        f"(a) GRPO group G={args.tree_group} P={args.tree_prompt} C={args.tree_completion}",
        grpo_group(gen, 512, args.tree_group, args.tree_prompt, args.tree_completion),
        model,
        optimizer,
        args.rounds,
    )
    run_case(
        f"(b) {args.tree_sessions} sessions x 16 turns, one rewrite each",
        rewritten_sessions(gen, 512, args.tree_sessions),
        model,
        optimizer,
        args.rounds,
    )


def add_arguments(parser) -> None:
    parser.add_argument("--tree", action="store_true", help="tree vs flat steps (benchmarks/tree_vs_flat.py)")
    parser.add_argument("--tree-hidden", type=int, default=256)
    parser.add_argument("--tree-layers", type=int, default=4)
    parser.add_argument("--tree-group", type=int, default=8)
    parser.add_argument("--tree-prompt", type=int, default=2048)
    parser.add_argument("--tree-completion", type=int, default=256)
    parser.add_argument("--tree-sessions", type=int, default=2)

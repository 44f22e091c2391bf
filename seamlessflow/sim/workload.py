"""Workload and cost model of the simulator, with where each default comes from.

Reference setting: GRPO on a 7B dense model (Qwen2.5-7B shape: 28 layers, 4 KV heads of 128, bf16) with
long chain-of-thought responses, one inference engine per H100-80GB GPU (TP=1), data-parallel training.

- Response lengths are long-tailed: lognormal with median 4,000 tokens and sigma 0.9, cut at 16,384
  (a max-length cap as in DAPO/DeepScaleR-style runs); about 6 % of responses hit the cap, the mean is
  ~5,500. Prompts are 1,024 tokens.
- Decode is memory-bandwidth bound: one step reads the weights (15 GB at ~2.4 TB/s achieved, ~6 ms, plus
  scheduling overhead: `decode_step_base_s` = 8 ms) and each running sequence's KV cache (57 KB/token at
  ~4k tokens of context: ~0.1 ms per sequence per step). At most 64 sequences run per engine: 64 x 17k
  tokens x 57 KB is ~62 GB of KV cache next to 15 GB of weights.
- Prefill is compute bound: 2N = 14 GFLOP/token at ~50 % of 989 TFLOP/s: 3e-5 s/token.
- Training costs ~12N FLOP/token (forward+backward 6N, activation recomputation 2N, old-policy and
  reference log-prob forwards 2N each) at 35 % MFU: 2.4e-4 s per token per GPU, perfect data parallelism,
  plus 5 s per step (optimizer step, gradient all-reduce, checkpoint bookkeeping).
- A role switch (offload KV cache and engine, onload parameters, gradients and optimizer states, or the
  reverse) costs 8 s; loading a new weight version into an engine costs 3 s (15 GB over the network, or a
  resharding for a colocated engine).
- A step trains 16 trajectories per GPU of the cluster (1,024 at 64 GPUs, 8,192 at 512).

With these figures the synchronous colocated baseline spends ~75-80 % of each step generating, inside the
70-90 % rollout share reported for synchronous RL of long-CoT models (e.g. the AReaL, StreamRL and Seer
papers); `tests/sim/test_simulator.py` checks the simulator stays in that band.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class TaskKind:
    """One family of tasks in a mixed workload: its share of submitted tasks, its prompt and response
    lengths (lognormal responses, as `Workload`), and the routing profile it declares (prefill | decode)."""

    name: str
    share: float
    profile: str
    prompt_tokens: int
    response_median: float
    response_sigma: float
    response_max: int

    def response_lengths(self, rng: np.random.Generator, count: int) -> np.ndarray:
        raw = rng.lognormal(mean=np.log(self.response_median), sigma=self.response_sigma, size=count)
        return np.clip(np.rint(raw), 1, self.response_max).astype(np.int64)


@dataclass(frozen=True)
class Workload:
    prompt_tokens: int = 1024
    response_median: float = 4000.0
    response_sigma: float = 0.9
    response_max: int = 16384
    decode_step_base_s: float = 0.008
    decode_step_per_seq_s: float = 0.0001
    max_running_per_engine: int = 64
    prefill_s_per_token: float = 3e-5
    train_s_per_token_gpu: float = 2.4e-4
    train_step_overhead_s: float = 5.0
    switch_s: float = 8.0
    sync_s: float = 3.0
    batch_per_gpu: int = 16
    tasks: tuple[TaskKind, ...] = ()  # a mixed workload; empty: one kind with the fields above, no profile

    def sample(self, rng: np.random.Generator, count: int) -> list[tuple[int, int, str | None]]:
        """`count` tasks as (prompt tokens, response tokens, profile). The single-kind draw is the one the
        simulator always made (same seed, same lengths)."""
        if not self.tasks:
            return [(self.prompt_tokens, int(n), None) for n in self.response_lengths(rng, count)]
        shares = np.array([k.share for k in self.tasks], dtype=float)
        kinds = rng.choice(len(self.tasks), size=count, p=shares / shares.sum())
        lengths = {i: iter(k.response_lengths(rng, count).tolist()) for i, k in enumerate(self.tasks)}
        return [(self.tasks[i].prompt_tokens, next(lengths[i]), self.tasks[i].profile) for i in kinds.tolist()]

    # the default engine cost (`SimEngine` asks the same of a `hardware.Roofline`)

    @property
    def max_running(self) -> int:
        return self.max_running_per_engine

    @property
    def kv_capacity_tokens(self) -> float:
        return math.inf  # the calibrated single-GPU model caps sequences by count only

    def response_lengths(self, rng: np.random.Generator, count: int) -> np.ndarray:
        raw = rng.lognormal(mean=np.log(self.response_median), sigma=self.response_sigma, size=count)
        return np.clip(np.rint(raw), 1, self.response_max).astype(np.int64)

    def decode_step_s(self, running: int, kv_tokens: float = 0.0) -> float:
        """Seconds for one decode step that advances every running sequence by one token (the KV read is
        folded into the per-sequence term at the reference context, so `kv_tokens` is not used)."""
        return self.decode_step_base_s + self.decode_step_per_seq_s * running

    def prefill_s(self, tokens: int) -> float:
        return self.prefill_s_per_token * tokens

    def train_step_s(self, tokens: int, gpus: int) -> float:
        return self.train_step_overhead_s + self.train_s_per_token_gpu * tokens / max(1, gpus)

    def batch_size(self, gpus: int) -> int:
        return self.batch_per_gpu * gpus


@dataclass(frozen=True)
class Arrivals:
    """Tasks arriving at a rate that changes by phase, as (seconds, tasks per second); after the last phase its
    rate goes on. Why: a cluster that trains for days sees a new task set arrive as a burst and then its long
    tail, and an elastic cluster is only worth its cost on such a load (`sim.elastic`)."""

    phases: tuple[tuple[float, float], ...]

    def __post_init__(self) -> None:
        if not self.phases or any(seconds <= 0 or rate < 0 for seconds, rate in self.phases):
            raise ValueError(f"phases must be (seconds > 0, rate >= 0) pairs, got {self.phases}")

    def arrived(self, t: float) -> int:
        """Tasks that have arrived by time `t` (a fluid count, rounded down)."""
        total, start = 0.0, 0.0
        for seconds, rate in self.phases:
            total += rate * min(seconds, max(0.0, t - start))
            start += seconds
        total += self.phases[-1][1] * max(0.0, t - start)
        return math.floor(total + 1e-9)

    @property
    def seconds(self) -> float:
        return sum(seconds for seconds, _ in self.phases)


def burst_then_lull(peak: float, burst_s: float = 900.0, lull_share: float = 0.1, lull_s: float = 2700.0) -> Arrivals:
    """A new task set at `peak` tasks/s for `burst_s`, then its long tail at `lull_share` of it."""
    return Arrivals(((burst_s, peak), (lull_s, peak * lull_share)))

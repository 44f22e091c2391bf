"""Heterogeneous GPUs for the simulator: published spec-sheet figures and a roofline cost model.

Why: ROLLART's hardware-aware routing rests on prefill being compute bound and decode bandwidth bound, so
GPUs with different FLOP/s-to-bandwidth ratios suit different sessions. The simulator prices that from
each GPU's published peak dense BF16 tensor FLOP/s and memory bandwidth, nothing tuned per GPU:

    time = max(FLOPs / (peak FLOP/s x compute_eff), bytes / (peak bandwidth x bandwidth_eff)) (+ overhead)

- Prefill of T tokens: FLOPs = T x 2N (weight matmuls) + attention (4 x layers x hidden x context per
  token, context averaging T/2); bytes = the weights, read once. Compute bound on every GPU here.
- One decode step of B running sequences holding K tokens of context in all: FLOPs = B x 2N + 4 x layers
  x hidden x K; bytes = weights + K x KV bytes per token. Bandwidth bound at small B, compute bound past
  the GPU's ridge point (an H20 reaches it near B = 25 on a 7B model, an H100 only past B = 200).
- KV-cache capacity: 90 % of memory minus the weights, in tokens; a sequence's whole context (prompt +
  response) is reserved at admission (conservative next to vLLM's on-demand blocks with preemption).

The same efficiency factors apply to every GPU (`Efficiency`), so the ratio between GPUs is the ratio of
their spec sheets. Peak figures are the vendors' published numbers (dense, i.e. without 2:4 sparsity).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Gpu:
    key: str
    name: str
    bf16_tflops: float  # peak dense BF16 tensor-core TFLOP/s
    hbm_tb_s: float  # peak memory bandwidth, TB/s
    memory_gb: float
    hardware_tags: frozenset[str]  # the class it is tagged with by default (compute | bandwidth) and its model


GPUS: dict[str, Gpu] = {
    g.key: g
    for g in (
        # NVIDIA H100 SXM5 datasheet: BF16 1,979 TFLOP/s with sparsity = 989 dense; HBM3 3.35 TB/s; 80 GB.
        Gpu("h100", "H100 SXM 80GB", 989.0, 3.35, 80.0, frozenset({"compute", "h100"})),
        # NVIDIA H20 (published spec): BF16 148 TFLOP/s dense; HBM3 4.0 TB/s; 96 GB.
        Gpu("h20", "H20 96GB", 148.0, 4.0, 96.0, frozenset({"bandwidth", "h20"})),
        # NVIDIA A100 SXM 80GB datasheet: BF16 312 TFLOP/s dense; HBM2e 2.039 TB/s; 80 GB.
        Gpu("a100", "A100 SXM 80GB", 312.0, 2.039, 80.0, frozenset({"a100"})),
        # NVIDIA L40S datasheet: BF16 733 TFLOP/s with sparsity = 362 dense; GDDR6 864 GB/s; 48 GB.
        Gpu("l40s", "L40S 48GB", 362.0, 0.864, 48.0, frozenset({"compute", "l40s"})),
        # NVIDIA H200 SXM datasheet: BF16 989 TFLOP/s dense (as H100); HBM3e 4.8 TB/s; 141 GB.
        Gpu("h200", "H200 SXM 141GB", 989.0, 4.8, 141.0, frozenset({"compute", "bandwidth", "h200"})),
    )
}


@dataclass(frozen=True)
class ModelShape:
    """A dense decoder. Default: Qwen2.5-7B (7.6 B parameters, 28 layers, hidden 3584, 4 KV heads of 128)."""

    name: str = "Qwen2.5-7B"
    params: float = 7.6e9
    layers: int = 28
    hidden: int = 3584
    kv_heads: int = 4
    head_dim: int = 128
    bytes_per_value: int = 2  # bf16 weights and KV cache

    @property
    def weight_bytes(self) -> float:
        return self.params * self.bytes_per_value

    @property
    def kv_bytes_per_token(self) -> float:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.bytes_per_value  # K and V

    def attention_flops(self, context_tokens: float) -> float:
        """QK^T and AV for one new token attending to `context_tokens` (all layers)."""
        return 4.0 * self.layers * self.hidden * context_tokens


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of peak, the same for every GPU: ~50 % MFU for prefill matmuls, ~75 % of peak
    bandwidth for decode (an H100 reading 7B weights at ~2.5 TB/s), 2 ms of scheduling per decode step."""

    compute: float = 0.5
    bandwidth: float = 0.75
    step_overhead_s: float = 0.002
    memory_use: float = 0.9  # vLLM's gpu_memory_utilization


class Roofline:
    """The cost of one engine (one GPU, TP=1) serving `model`; what `SimEngine` asks for its timings."""

    def __init__(self, gpu: Gpu, model: ModelShape | None = None, efficiency: Efficiency | None = None,
                 max_running: int = 256):
        self.gpu, self.model, self.eff = gpu, model or ModelShape(), efficiency or Efficiency()
        self.max_running = max_running  # vLLM's max_num_seqs
        self._flops = gpu.bf16_tflops * 1e12 * self.eff.compute
        self._bytes = gpu.hbm_tb_s * 1e12 * self.eff.bandwidth
        free = gpu.memory_gb * 1e9 * self.eff.memory_use - self.model.weight_bytes
        if free <= 0:
            raise ValueError(f"{self.model.name} does not fit on a {gpu.name}")
        self.kv_capacity_tokens = free / self.model.kv_bytes_per_token

    def _time(self, flops: float, nbytes: float) -> float:
        return max(flops / self._flops, nbytes / self._bytes)

    def prefill_s(self, tokens: int) -> float:
        m = self.model
        return self._time(tokens * 2 * m.params + tokens * m.attention_flops(tokens / 2), m.weight_bytes)

    def decode_step_s(self, running: int, kv_tokens: float = 0.0) -> float:
        m = self.model
        flops = running * 2 * m.params + m.attention_flops(kv_tokens)
        return self.eff.step_overhead_s + self._time(flops, m.weight_bytes + kv_tokens * m.kv_bytes_per_token)

"""The `rollout:` section of the settings: how each rollout worker starts and drives its engine.

```yaml
rollout:
  model: null              # HF model dir; null = <data_dir>/models/tiny (built by `seamlessflow model init`)
  dtype: float32
  pause_mode: keep         # keep | wait | abort, used when a pause command names no mode
  weight_load_methods: [reload, restart]   # tried in order until one works
  release_mode: stop       # set_active train/idle: stop | sleep (GPU, --enable-sleep-mode) | keep
  workers:
    rollout-0: {cpus: "0", capability_tags: [rollout]}
    rollout-1: {gpu: "1", capability_tags: [rollout, train], port: 8201, hardware_tags: [compute, h100]}
```
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from seamlessflow.config import SectionOptions, Settings
from seamlessflow.core.control import PauseMode
from seamlessflow.core.resources import Tag
from seamlessflow.model.lora import TeamAdapter, adapters_in
from seamlessflow.model.sampling import SamplingOptions

SWAP_METHODS: tuple[Literal["reload", "restart"], ...] = ("reload", "restart")


class WorkerSpec(BaseModel):
    """One inference resource: what it may do, where its engine listens, which hardware it owns."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    capability_tags: list[Tag] = Field(default_factory=lambda: [Tag.ROLLOUT])
    """Roles the scheduler may give it: `rollout`, and `train` for one that can also train."""
    hardware_tags: list[str] = Field(default_factory=list)
    """What its hardware is good at, for the proxy's routing: compute | bandwidth | a GPU model (e.g. h100)."""
    active_tag: Tag = Tag.ROLLOUT
    """Its role at start."""
    port: int | None = None
    """Port of its engine's HTTP server; None: a free port."""
    cpus: str | None = None
    """Cores its engine is pinned to, e.g. "0-1" (taskset and vLLM's OMP binding); None: not pinned."""
    gpu: str | None = None
    """CUDA_VISIBLE_DEVICES of its engine, e.g. "0" or "0,1"; None: no GPU."""


class RolloutOptions(SectionOptions):
    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "rollout"

    model: str | None = None
    """The HF model (directory or hub name) the engines serve and, without a `trainer.model_path`, the trainer
    trains (`seamlessflow.model.choice` decides for both); None: the tiny model in <data_dir>/models/tiny."""
    served_model_name: str = "tiny"
    """The model name the engines serve it under (vLLM's --served-model-name)."""
    host: str = "127.0.0.1"
    """Address the engines listen on."""
    dtype: str = "float32"
    """The engines' dtype (float32 keeps logprobs comparable with the trainer's, which computes in float32)."""
    max_model_len: int | None = None
    """The engines' context window in tokens, prompt and completion together (--max-model-len); null: the
    model's own (its max_position_embeddings: 32768 for the tiny model)."""
    seed: int = 0
    """The engines' sampling seed (--seed)."""
    optimization_level: int | None = None
    """vLLM's -O level; 0 = no compilation (fastest start, slower decode); None: vLLM's default."""
    kv_cache_gb: int = 1
    """KV cache size of a CPU engine in GiB (VLLM_CPU_KVCACHE_SPACE)."""
    pause_mode: PauseMode = PauseMode.KEEP
    """What a pause does to requests in flight when the command names no mode: keep | wait | abort."""
    weight_load_methods: list[Literal["reload", "restart"]] = Field(default_factory=lambda: list(SWAP_METHODS))
    """How a new weight version is loaded from files, tried in order until one works."""
    release_mode: Literal["stop", "sleep", "keep"] = "stop"
    """What the engine does when its resource goes to train or idle: stop | sleep (GPU sleep mode) | keep."""
    # KV computed with the old weights is stale: `recompute` re-prefills paused requests with the new weights (their
    # tokens are kept)
    kv_after_swap: Literal["recompute", "keep"] = "recompute"
    """After an in-place weight reload: drop the stale KV cache and re-prefill (`recompute`), or reuse it (`keep`)."""
    heartbeat_s: float = 2.0
    """Period of the worker's status heartbeat in seconds."""
    health_timeout_s: float = 900.0
    """Longest wait for a (re)started engine to become healthy."""
    max_restarts: int = 5
    """Engine crashes tolerated before the worker reports itself failed and stops."""
    # --weight-transfer-config: `gloo` is this project's plugin; the trainer must use the same backend
    weight_transfer: str | None = None
    """Weight-transfer backend the engines start with: `gloo` (CPU) or `nccl` (GPU); None: versions as files only."""
    transfer_wait_s: float = 20.0
    """How long a restarted engine behind the newest version waits for the trainer's transfer before loading files."""
    # --enable-auto-tool-choice --tool-call-parser: one that fits the model's chat template (`pythonic` for the tiny
    # models, `hermes` for Qwen, ...)
    tool_call_parser: str | None = "pythonic"
    """vLLM's tool-call parser for `tool_choice: auto` (`pythonic`, `hermes`, ...); None: no parser (vLLM's 400)."""
    extra_args: list[str] = Field(default_factory=list)
    """Extra command-line arguments for every engine (`vllm serve ...`)."""
    sampling: SamplingOptions = Field(default_factory=SamplingOptions)
    """How every call is sampled and what happens to an agent's own sampling settings (`model.sampling`): the
    proxy applies it, the engines return the logprobs it names, the trainer reproduces the temperature."""
    lora_adapters: list[TeamAdapter] = Field(default_factory=list)
    """The LoRA adapters every engine serves beside the base (`--enable-lora ... --lora-modules name=path`);
    unset: those of `proxy.teams`. Not added when `extra_args` has its own `--enable-lora`."""
    max_loras: int | None = Field(default=None, ge=1)
    """Adapters one batch may mix (`--max-loras`: device memory is reserved for that many at the largest rank);
    None: one per adapter. Fewer than the teams' adapters: the least recently used is evicted and reloaded on its
    next call."""
    max_cpu_loras: int | None = Field(default=None, ge=1)
    """Adapters kept in host memory (`--max-cpu-loras`, at least `max_loras`); None: vLLM's default (`max_loras`)."""
    env: dict[str, str] = Field(default_factory=dict)
    """Extra environment variables for every engine."""
    workers: dict[str, WorkerSpec] = Field(default_factory=dict)
    """The inference resources by id, one rollout worker and engine each (`rollout-0`, ...)."""

    @classmethod
    def section_data(cls, settings: Settings) -> dict[str, Any]:
        """The engines serve the teams' adapters the proxy routes to (`proxy.teams.<team>.lora`)."""
        section = settings.section(cls.SECTION)
        if "lora_adapters" not in section:
            section["lora_adapters"] = list(adapters_in(settings.section("proxy").get("teams") or {}).values())
        return section

    def worker(self, resource_id: str) -> WorkerSpec:
        return self.workers.get(resource_id, WorkerSpec())

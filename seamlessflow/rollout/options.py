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

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from seamlessflow.config import Settings
from seamlessflow.core.control import PauseMode
from seamlessflow.core.resources import Tag

SWAP_METHODS: tuple[Literal["reload", "restart"], ...] = ("reload", "restart")


class WorkerSpec(BaseModel):
    """One inference resource: what it may do, where its engine listens, which hardware it owns."""

    model_config = ConfigDict(extra="forbid")

    capability_tags: list[Tag] = Field(default_factory=lambda: [Tag.ROLLOUT])
    # what its hardware is good at, for the proxy's routing: compute | bandwidth | a GPU model (e.g. h100)
    hardware_tags: list[str] = Field(default_factory=list)
    active_tag: Tag = Tag.ROLLOUT  # role at start
    port: int | None = None  # None: a free port
    cpus: str | None = None  # e.g. "0-1": the engine is pinned there (taskset + vLLM's OMP binding)
    gpu: str | None = None  # CUDA_VISIBLE_DEVICES for the engine


class RolloutOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str | None = None
    served_model_name: str = "tiny"
    host: str = "127.0.0.1"
    dtype: str = "float32"  # the trainer computes in float32: the same numbers keep logprobs comparable
    max_model_len: int = 1024
    seed: int = 0
    optimization_level: int | None = None  # vLLM -O level; 0 = no compilation (fastest start, slower decode)
    kv_cache_gb: int = 1  # VLLM_CPU_KVCACHE_SPACE (CPU only)
    pause_mode: PauseMode = PauseMode.KEEP
    weight_load_methods: list[Literal["reload", "restart"]] = Field(default_factory=lambda: list(SWAP_METHODS))
    release_mode: Literal["stop", "sleep", "keep"] = "stop"
    # After an in-place reload, KV computed with the old weights is stale: `recompute` drops the prefix
    # cache and re-prefills paused requests with the new weights (their tokens are kept); `keep` reuses it.
    kv_after_swap: Literal["recompute", "keep"] = "recompute"
    heartbeat_s: float = 2.0
    health_timeout_s: float = 900.0
    max_restarts: int = 5  # engine crashes tolerated before the worker reports itself failed and stops
    # vLLM weight-transfer backend the engine starts with (--weight-transfer-config): `gloo` (CPU, this
    # project's plugin) or `nccl` (GPU); None: versions arrive as files only.
    weight_transfer: str | None = None
    # a (re)started engine behind the newest version waits this long for the trainer to stream it in, then
    # loads the version's files (HTTP or file://) when it has any
    transfer_wait_s: float = 20.0
    # vLLM's tool-call parser for `tool_choice: auto` (--enable-auto-tool-choice --tool-call-parser): one that
    # fits the model's chat template (`pythonic` for the tiny models, `hermes` for Qwen, ...); None: no parser
    # (agents that send tools with `tool_choice: auto` then get vLLM's 400)
    tool_call_parser: str | None = "pythonic"
    extra_args: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    workers: dict[str, WorkerSpec] = Field(default_factory=dict)

    @classmethod
    def from_settings(cls, settings: Settings) -> RolloutOptions:
        return cls.model_validate(settings.section("rollout"))

    def model_dir(self, settings: Settings) -> Path:
        return Path(self.model) if self.model else Path(settings.data_dir) / "models" / "tiny"

    def worker(self, resource_id: str) -> WorkerSpec:
        return self.workers.get(resource_id, WorkerSpec())

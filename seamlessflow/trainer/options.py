"""The trainer's own settings section (`trainer:` in the YAML, `SEAMLESSFLOW_TRAINER__*` in the env)."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from seamlessflow.config import Settings
from seamlessflow.core.batching import TRAINABLE_STATUSES, BatchConfig, StalenessPolicy
from seamlessflow.core.episodes import TrajectoryStatus
from seamlessflow.core.losses import PolicyLossConfig
from seamlessflow.core.turn_advantages import AdvantageRule
from seamlessflow.ports import NODE_ADDRESS_ENV

if TYPE_CHECKING:
    from seamlessflow.trainer.engine import MemoryOptions

DEEPSPEED_CONFIGS = Path(__file__).resolve().parents[2] / "infra" / "deepspeed"


class TrainerOptions(BaseModel):
    """Everything the trainer process needs beyond the shared settings.

    ``deepspeed`` is passed to `deepspeed.initialize` untouched: a path to a JSON file or the dict itself.
    Its `train_micro_batch_size_per_gpu` sets how many sequences go through one forward/backward; one
    optimizer step always consumes exactly one batch of groups (the batch threshold below), whatever
    `gradient_accumulation_steps` says.
    """

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    resource_id: str = "trainer-0"
    model_path: str = ""  # HF directory; empty: what the rollout engines serve, found (or built) on this node
    deepspeed: str | dict[str, Any] = str(DEEPSPEED_CONFIGS / "cpu_zero1.json")
    consumer_group: str | None = None  # default "<topic_prefix>.<team>.<run>.trainer"
    initial_role: Literal["train", "idle"] = "train"
    # batching (seamlessflow.core.batching)
    group_size: int = 4
    batch_threshold: int = 2
    threshold_kind: Literal["groups", "tokens"] = "groups"
    group_timeout_s: float | None = 300.0
    max_staleness: int | None = None
    stale_mode: Literal["drop", "downweight"] = "drop"
    stale_decay: float = 0.5
    success_reward: float = 1.0
    trainable_statuses: list[TrajectoryStatus] = list(TRAINABLE_STATUSES)
    # memory over days: judged groups held for at most this many steps ahead (the rest waits on the topic),
    # and the newest ids remembered to skip duplicates (seamlessflow.core.recent_ids)
    prefetch_steps: float = Field(default=2.0, gt=0)
    dedup_window: int = Field(default=100_000, ge=1000)
    # librdkafka's prefetch bound (queued.max.messages.kbytes, 64 MiB by default): each pause above throws
    # the queue away and each resume fetches it again, churn that grew the trainer's native memory
    fetch_queue_mib: float = Field(default=4.0, gt=0)
    # loss (seamlessflow.core.losses)
    scale_by_std: bool = True
    clip_low: float = 0.2
    clip_high: float = 0.2
    kl_coef: float = 0.0
    tis_cap: float | None = None
    ratio: Literal["token", "sequence"] = "token"  # sequence: GSPO's sequence-level ratio (clip ~3e-4/4e-4)
    # per-turn rewards (seamlessflow.core.turn_advantages): session | return_to_go | per_turn_group
    advantages: AdvantageRule = AdvantageRule.SESSION
    discount: float = Field(1.0, ge=0.0, le=1.0)  # return_to_go: a later turn's reward counts discount^(turns)
    # memory (seamlessflow.trainer.engine.MemoryOptions says what each does)
    max_tokens_per_micro_batch: int | None = None
    packing: bool | None = None  # None: only with varlen attention (flash_attention_2/3)
    logprob_chunk_tokens: int | None = 1024
    activation_checkpointing: bool = False
    offload_reference: bool = False
    attn_implementation: str | None = None  # transformers' choice when None (sdpa)
    tree: bool | None = None  # train on token trees (shared prefixes once): None where it pays, true, false
    # data-parallel ranks (seamlessflow.trainer.launch): ranks per node; several start under torch's launcher
    ranks: int = 1
    nnodes: int = 1  # with more than one, every node runs the trainer with its own node_rank
    node_rank: int = 0
    master_addr: str = "127.0.0.1"  # node 0's address, reachable from every node
    master_port: int = 29500
    # weights, checkpoints, status
    publish_every: int = 1  # steps per weight version (what engines load: the weights only, written once)
    # live transfer (seamlessflow/weights/transfer.py): each version straight into the engines that serve the
    # policy; `none` keeps versions as files only. Engines must start with the same backend
    # (`rollout.weight_transfer`); `transfer_host` is the address they reach this trainer at.
    weight_transfer: Literal["none", "gloo", "nccl"] = "none"
    transfer_host: str = "127.0.0.1"
    transfer_bucket_mb: int = 64
    files_every: int = 1  # with a transfer: versions per file archive (the fallback); 1 = every version
    # version files over HTTP (seamlessflow/weights/http_files.py) for engines without this node's directory:
    # the leader serves its weights root and announces http:// URIs. `auto` serves when the trainer is told an
    # address other than loopback to be reached at (`weights_host`, else `transfer_host`): engines may then be
    # on other hosts. A worker that sees the directory itself still loads it in place (no copy).
    serve_weights: Literal["auto", "always", "never"] = "auto"
    weights_host: str | None = None  # the address engines fetch versions from (None: transfer_host)
    weights_bind: str | None = None  # the address the server listens on (None: the advertised one)
    weights_port: int = 0  # 0: a free port (every start announces its newest version again, with the new URI)
    checkpoint_every: int = 1  # weight versions per full checkpoint (optimizer state; offsets are committed)
    checkpoint_minutes: float | None = None  # also at the first version this long after the last checkpoint
    keep_checkpoints: int = 2
    # where checkpoints live beyond this node (seamlessflow/storage.py): None keeps them in the work dir only
    # (today's default); `s3://bucket/prefix` (or a path every trainer node sees) gets every checkpoint
    # uploaded, and a trainer that starts without it locally downloads the newest one and resumes from it
    checkpoint_uri: str | None = None
    checkpoint_storage: dict[str, Any] = Field(default_factory=dict)  # fsspec options (s3fs: endpoint_url, key, ...)
    keep_weight_versions: int = 3
    heartbeat_s: float = 2.0
    max_steps: int | None = None  # stop after this many steps (tests, benchmarks)

    @classmethod
    def from_settings(cls, settings: Settings) -> TrainerOptions:
        return cls.model_validate(settings.section("trainer"))

    def group_id(self, settings: Settings) -> str:
        return self.consumer_group or f"{settings.topic_prefix}.{settings.team}.{settings.run}.trainer"

    def deepspeed_dict(self) -> dict[str, Any]:
        if isinstance(self.deepspeed, dict):
            return dict(self.deepspeed)
        return json.loads(Path(self.deepspeed).read_text())

    def batch_config(self) -> BatchConfig:
        return BatchConfig(
            group_size=self.group_size,
            threshold=self.batch_threshold,
            threshold_kind=self.threshold_kind,
            group_timeout_s=self.group_timeout_s,
            staleness=StalenessPolicy(self.max_staleness, self.stale_mode, self.stale_decay),
            success_reward=self.success_reward,
            trainable_statuses=frozenset(self.trainable_statuses),
            dedup_window=self.dedup_window,
            advantage=self.advantages,
            discount=self.discount,
        )

    def loss_config(self) -> PolicyLossConfig:
        return PolicyLossConfig(self.clip_low, self.clip_high, self.kl_coef, self.tis_cap, self.ratio)

    def memory_options(self) -> MemoryOptions:
        from seamlessflow.trainer.engine import MemoryOptions  # imports DeepSpeed: only when a trainer starts

        return MemoryOptions(self.max_tokens_per_micro_batch, self.packing, self.logprob_chunk_tokens,
                             self.activation_checkpointing, self.offload_reference, self.attn_implementation,
                             self.tree)

    def with_model(self, settings: Settings) -> TrainerOptions:
        """With `model_path` filled: an empty one is what the engines serve (`rollout.model`, else the tiny
        model in this node's data_dir): the trainer trains the engines' model, and no path is shared."""
        if self.model_path:
            return self
        from seamlessflow.rollout.options import RolloutOptions

        rollout = RolloutOptions.from_settings(settings)  # a hub name stays a name; the tiny model's dir is ours
        model = rollout.model or str(rollout.model_dir(settings).resolve())
        return self.model_copy(update={"model_path": model})

    def advertised_weights_host(self) -> str:
        """`weights_host`, else `transfer_host`; a loopback one under a placement that spreads the stack over
        hosts (Ray) becomes this node's address, so engines elsewhere fetch versions over HTTP unasked."""
        host = self.weights_host or self.transfer_host
        if _loopback(host) and os.environ.get(NODE_ADDRESS_ENV):
            return os.environ[NODE_ADDRESS_ENV]
        return host

    def serves_weights(self) -> bool:
        """Whether the leader serves its version directories over HTTP (see `serve_weights`)."""
        if self.serve_weights != "auto":
            return self.serve_weights == "always"
        return not _loopback(self.advertised_weights_host())

    def work_dir(self, settings: Settings) -> Path:
        return Path(settings.data_dir).resolve() / "trainer" / self.resource_id

    def checkpoint_dir(self, settings: Settings) -> Path:
        """DeepSpeed's checkpoints, written by every rank of the group (each its part)."""
        return self.work_dir(settings) / "checkpoints"


def _loopback(host: str) -> bool:
    """A host name counts as another host's address unless it is `localhost` or a loopback IP."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False

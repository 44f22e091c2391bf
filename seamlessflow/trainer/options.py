"""The trainer's own settings section (`trainer:` in the YAML, `SEAMLESSFLOW_TRAINER__*` in the env)."""

from __future__ import annotations

import ipaddress
import json
import os
from pathlib import Path
from typing import Any, Literal

from pydantic import ConfigDict, Field

from seamlessflow.config import SectionOptions, Settings
from seamlessflow.core.batching import TRAINABLE_STATUSES, BatchConfig, StalenessPolicy
from seamlessflow.core.distillation import Objective, ObjectiveConfig
from seamlessflow.core.episodes import TrajectoryStatus
from seamlessflow.core.loss_config import PolicyLossConfig
from seamlessflow.core.turn_advantages import AdvantageRule
from seamlessflow.model.choice import model_name_or_path
from seamlessflow.model.lora import TeamAdapter
from seamlessflow.ports import NODE_ADDRESS_ENV
from seamlessflow.trainer.memory import MemoryConfig

DEEPSPEED_CONFIGS = Path(__file__).resolve().parents[2] / "infra" / "deepspeed"


class TrainerOptions(SectionOptions):
    """Everything the trainer process needs beyond the shared settings.

    ``deepspeed`` is passed to `deepspeed.initialize` untouched: a path to a JSON file or the dict itself.
    Its `train_micro_batch_size_per_gpu` sets how many sequences go through one forward/backward; one
    optimizer step always consumes exactly one batch of groups (the batch threshold below), whatever
    `gradient_accumulation_steps` says.
    """

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    SECTION = "trainer"

    enabled: bool = False
    """Read by nothing: `services.trainer` says whether `up` runs the trainer (kept so configs validate)."""
    resource_id: str = "trainer-0"
    """Its resource id on the control and status topics; also names its work dir <data_dir>/trainer/<id>."""
    model_path: str = ""
    """The HF model directory it trains; empty: what the rollout engines serve, found or built on this node."""
    deepspeed: str | dict[str, Any] = str(DEEPSPEED_CONFIGS / "cpu_zero1.json")
    """DeepSpeed config passed to `deepspeed.initialize` untouched: a JSON file's path or the dict itself."""
    consumer_group: str | None = None
    """Its Kafka consumer group on the trajectories; None: `<topic_prefix>.<team>.<run>.trainer`."""
    initial_role: Literal["train", "idle"] = "train"
    """Its role at start: `train`, or `idle` until the scheduler hands it the train role."""
    # batching (seamlessflow.core.batching)
    group_size: int = 4
    """Trajectories per task that close a GRPO group."""
    batch_threshold: int = 2
    """Groups (or trained tokens, see `threshold_kind`) that make one optimizer step's batch."""
    threshold_kind: Literal["groups", "tokens"] = "groups"
    """What `batch_threshold` counts: `groups` or trained `tokens`."""
    group_timeout_s: float | None = 300.0
    """A group still incomplete this long after its first trajectory is closed with what came; None: wait."""
    max_staleness: int | None = None
    """Versions a trajectory's oldest token may lag the trained one before `stale_mode` applies; None: any."""
    stale_mode: Literal["drop", "downweight"] = "drop"
    """What happens to a trajectory beyond `max_staleness`: `drop` it, or `downweight` it."""
    stale_decay: float = 0.5
    """In `downweight` mode a stale trajectory weighs stale_decay ** (versions beyond the bound)."""
    success_reward: float = 1.0
    """A group whose rewards all reach this marks its task too easy (SRPO history resampling)."""
    trainable_statuses: list[TrajectoryStatus] = list(TRAINABLE_STATUSES)
    """Trajectory statuses that are trained on (others are skipped)."""
    # memory over days: judged groups held for at most this many steps ahead (the rest waits on the topic),
    # and the newest ids remembered to skip duplicates (seamlessflow.core.recent_ids)
    prefetch_steps: float = Field(default=2.0, gt=0)
    """Batches judged and held ahead of the optimizer at most; the rest waits on the topic."""
    dedup_window: int = Field(default=100_000, ge=1000)
    """Newest trajectory and group ids remembered to skip duplicates and late samples."""
    # librdkafka's prefetch bound (queued.max.messages.kbytes, 64 MiB by default): each pause above throws
    # the queue away and each resume fetches it again, churn that grew the trainer's native memory
    fetch_queue_mib: float = Field(default=4.0, gt=0)
    """librdkafka's prefetch bound on the trajectories topic, in MiB (queued.max.messages.kbytes)."""
    # loss (seamlessflow.core.losses)
    scale_by_std: bool = True
    """Divide group-relative advantages by the group's reward std (GRPO); false: only subtract the mean."""
    clip_low: float = 0.2
    """Lower clip range of the policy ratio (1 - clip_low)."""
    clip_high: float = 0.2
    """Upper clip range of the policy ratio (1 + clip_high); above clip_low is DAPO's clip-higher."""
    kl_coef: float = 0.0
    """Weight of the KL penalty against the reference model; 0: KL-free (no reference loaded)."""
    tis_cap: float | None = None
    """Decoupled PPO with truncated importance sampling: the ratio is clipped against the proximal policy (the
    weights the step starts from: each batch is one optimizer step, so none is recomputed) and each token weighted
    by min(pi_prox / pi_rollout, tis_cap); None: off (the ratio is taken against pi_rollout)."""
    ratio: Literal["token", "sequence"] = "token"
    """Importance ratio per `token` (PPO) or per `sequence` (GSPO; clip about 3e-4 / 4e-4)."""
    mismatch_warn: float | None = Field(default=0.05, gt=0)
    """A warning in the log (naming the cause it suspects) when a step's mean |trainer - engine logprob| on tokens
    of the version the trainer holds exceeds this (`mismatch_*` figures on its heartbeat); None: never."""
    dual_clip: float | None = Field(default=3.0, gt=1.0)
    """Dual-clip PPO (verl's clip_ratio_c): a negative-advantage token's loss is at most -A * dual_clip, so a ratio
    blown up by a token the rollout policy found unlikely cannot dominate the step; None: off."""
    # per-turn rewards (seamlessflow.core.turn_advantages): session | return_to_go | per_turn_group
    advantages: AdvantageRule = AdvantageRule.SESSION
    """How rewards become advantages: session | return_to_go | per_turn_group (`core.turn_advantages`)."""
    discount: float = Field(default=1.0, ge=0.0, le=1.0)
    """For return_to_go: a reward k turns later counts discount ** k."""
    # on-policy distillation (seamlessflow.core.distillation; the teacher: the `teacher` section)
    objective: Objective = Objective.RL
    """What the trainer learns from: `rl` (rewards), `distill` (a teacher's logprobs of the sampled tokens: the
    advantage of a token is distill_coef * (log pi_teacher - log pi_student)) or `rl+distill` (their sum)."""
    distill_coef: float = Field(default=1.0, gt=0)
    """Weight of the distillation advantage (the Tinker cookbook's kl_penalty_coef)."""
    # memory (seamlessflow.trainer.policy_engine.MemoryConfig says what each does)
    max_tokens_per_micro_batch: int | None = None
    """Token positions per forward/backward; None: DeepSpeed's micro-batch size in sequences."""
    packing: bool | None = None
    """Sequences end to end in one row; None: only with varlen attention (flash_attention_2/3)."""
    logprob_chunk_tokens: int | None = 1024
    """Positions per chunk of LM head and log-softmax (bounds the logits' memory)."""
    activation_checkpointing: bool = False
    """Recompute each decoder layer in the backward (HF gradient checkpointing)."""
    offload_reference: bool = False
    """Keep the KL reference model's weights in host memory and stream them layer by layer."""
    attn_implementation: str | None = None
    """The attention implementation passed to transformers; None: its default (sdpa)."""
    tree: bool | None = None
    """Train on token trees (shared prefixes computed once): None where it pays, true, false."""
    # data-parallel ranks (seamlessflow.trainer.launch): ranks per node; several start under torch's launcher
    ranks: int = 1
    """Data-parallel ranks per node; more than one start under torch's launcher."""
    nnodes: int = 1
    """Trainer nodes; with more than one, every node runs the trainer with its own node_rank."""
    node_rank: int = 0
    """This node's rank among `nnodes`."""
    master_addr: str = "127.0.0.1"
    """Node 0's address, reachable from every node (the rendezvous)."""
    master_port: int = 29500
    """Node 0's rendezvous port."""
    # weights, checkpoints, status
    publish_every: int = 1
    """Optimizer steps per weight version (what engines load: the weights only, written once)."""
    # live transfer (seamlessflow/weights/transfer.py): each version straight into the engines that serve the
    # policy; `none` keeps versions as files only. Engines must start with the same backend
    # (`rollout.weight_transfer`); `transfer_host` is the address they reach this trainer at.
    weight_transfer: Literal["none", "gloo", "nccl"] = "none"
    """Live transfer of each version into the engines: none | gloo | nccl (as `rollout.weight_transfer`)."""
    transfer_host: str = "127.0.0.1"
    """The address the engines reach this trainer at for the live transfer."""
    transfer_bucket_mb: int = 64
    """Size of one bucket of the live weight transfer, in MiB."""
    transfer_timeout_s: float = Field(default=300.0, gt=0)
    """An engine that has not joined, or not taken a version, this long after it began is dropped from that version
    (taken out of routing; it catches up from files) without holding up the others or the trainer."""
    files_every: int = 1
    """With a live transfer: versions per file archive (the fallback); 1 = every version."""
    # version files over HTTP (seamlessflow/weights/http_files.py) for engines without this node's directory:
    # the leader serves its weights root and announces http:// URIs. `auto` serves when the trainer is told an
    # address other than loopback to be reached at (`weights_host`, else `transfer_host`): engines may then be
    # on other hosts. A worker that sees the directory itself still loads it in place (no copy).
    serve_weights: Literal["auto", "always", "never"] = "auto"
    """Serve version files over HTTP: auto (when reached at a non-loopback address) | always | never."""
    weights_host: str | None = None
    """The address engines fetch versions from; None: transfer_host."""
    weights_bind: str | None = None
    """The address the weights server listens on; None: the advertised one."""
    weights_port: int = 0
    """The weights server's port; 0: a free port (each start announces its newest version again)."""
    checkpoint_every: int = 1
    """Weight versions per full checkpoint (optimizer state; offsets are committed)."""
    checkpoint_minutes: float | None = None
    """Also checkpoint at the first version this long after the last checkpoint; None: off."""
    keep_checkpoints: int = 2
    """Checkpoints kept; older ones are deleted."""
    # where checkpoints live beyond this node (seamlessflow/storage.py): None keeps them in the work dir only
    # (today's default); `s3://bucket/prefix` (or a path every trainer node sees) gets every checkpoint
    # uploaded, and a trainer that starts without it locally downloads the newest one and resumes from it
    checkpoint_uri: str | None = None
    """Where checkpoints are also uploaded (`s3://bucket/prefix` or a shared path); None: work dir only."""
    checkpoint_storage: dict[str, Any] = Field(default_factory=dict)
    """fsspec options for `checkpoint_uri` (s3fs: endpoint_url, key, ...)."""
    keep_weight_versions: int = 3
    """Weight versions kept on disk; older ones are deleted."""
    heartbeat_s: float = 2.0
    """Period of the trainer's status heartbeat in seconds."""
    max_steps: int | None = None
    """Stop after this many optimizer steps (tests, benchmarks); None: run until stopped."""
    # teams' adapters (seamlessflow/trainer/adapter.py): a stack trains the base or adapters, never both
    target: Literal["base", "adapters"] = "base"
    """What the stack trains: `base` (one trainer, every team's trajectories) or `adapters` (`up` runs one trainer
    per team with an adapter, `proxy.teams.<team>.lora`, each on its team's trajectories; the base stays frozen)."""
    teams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per-team settings over this section for that team's adapter trainer, e.g. `{red: {kl_coef: 0.01}}`."""
    share_weight: float = Field(default=1.0, gt=0)
    """An adapter trainer's weight in the scheduler's training time share (`scheduler.train_share`): where the
    teams' trainers share devices, each busy one holds turns in proportion to it. Set per team under `teams`."""
    adapter: str | None = None
    """The team whose LoRA adapter (`proxy.teams.<team>.lora`) this trainer trains, on the frozen base, on that
    team's trajectories only; None: it trains the base on all. Set by `up` for each trainer under `target: adapters`."""

    @classmethod
    def section_data(cls, settings: Settings) -> dict[str, Any]:
        """An adapter's trainer reads its team's `teams` entry over the section."""
        data = settings.section(cls.SECTION)
        return {**data, **(data.get("teams") or {}).get(data.get("adapter"), {})}

    def for_adapter(self, team: str) -> TrainerOptions:
        """The options of `team`'s adapter trainer: its team's entry over these, its own resource id (and so its
        work dir, role writer and versions) and consumer group."""
        data = {**self.model_dump(), **self.teams.get(team, {})}
        return TrainerOptions.model_validate({**data, "adapter": team, "resource_id": f"{self.resource_id}-{team}"})

    def group_id(self, settings: Settings) -> str:
        """An adapter's trainer reads under a group of its own (beside the other teams' trainers)."""
        suffix = f".{self.adapter}" if self.adapter else ""
        return (self.consumer_group or f"{settings.topic_prefix}.{settings.team}.{settings.run}.trainer") + suffix

    def team_adapter(self, settings: Settings) -> TeamAdapter | None:
        """The adapter this trainer trains (None: the base), checked against what adapter training allows."""
        if self.adapter is None:
            return None
        entry = (settings.section("proxy").get("teams") or {}).get(self.adapter) or {}
        if not entry.get("lora"):
            raise ValueError(f"trainer.adapter: team {self.adapter!r} has no adapter (proxy.teams.{self.adapter}.lora)")
        if self.weight_transfer != "none":
            raise ValueError(f"trainer.adapter: adapter versions are published as files only; set "
                             f"trainer.weight_transfer: none (not {self.weight_transfer!r})")
        if int(self.deepspeed_dict().get("zero_optimization", {}).get("stage", 0)) == 3:
            raise ValueError("trainer.adapter: ZeRO stage 3 is not supported for adapter training (trainer.deepspeed "
                             "zero_optimization.stage: use 1 or 2)")
        return TeamAdapter.model_validate(entry["lora"])

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
            distills=self.objective_config().distills,
        )

    def objective_config(self) -> ObjectiveConfig:
        return ObjectiveConfig(self.objective, self.distill_coef)

    def loss_config(self) -> PolicyLossConfig:
        return PolicyLossConfig(self.clip_low, self.clip_high, self.kl_coef, self.tis_cap, self.ratio,
                                self.dual_clip)

    def memory_config(self) -> MemoryConfig:
        """The frozen plain view the trainer's `PolicyEngine` takes."""
        return MemoryConfig(self.max_tokens_per_micro_batch, self.packing, self.logprob_chunk_tokens,
                            self.activation_checkpointing, self.offload_reference, self.attn_implementation,
                            self.tree)

    def with_model(self, settings: Settings) -> TrainerOptions:
        """With `model_path` filled: an empty one is the run's model (`seamlessflow.model.choice`: `rollout.model`,
        else the tiny model in this node's data_dir), the one the engines serve, and no path is shared."""
        if self.model_path:
            return self
        return self.model_copy(update={"model_path": model_name_or_path(settings)})

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

"""The trainer loop: trajectories in, one DeepSpeed step per batch of groups, weights and records out.

Per step, in this order, so a crash at any point replays and never skips:
1. train on a batch (optimizer step);
2. every `publish_every` steps: snapshot the weights as version N+1 (once, in the training dtype: what the
   engines load); with `weight_transfer` the snapshot goes straight into every serving engine
   (seamlessflow/weights/transfer.py; with `nccl` the module's device memory goes instead, bucket by bucket,
   and the host snapshot is taken only for versions with files); every `files_every` versions (every
   version without a transfer) a background writer saves it (seamlessflow/weights/files.py). The
   WeightVersion record is published once the version is delivered (or its failed engines routed out)
   and, if it has files, once they are on disk;
3. every `checkpoint_every` versions or `checkpoint_minutes` (whichever comes first): save a checkpoint
   (after the pending weight writes finish; model, optimizer, step, version, offsets to commit, ids
   already finished above them) under a tag of its own, then commit the offsets, then name it `latest`.
   Offsets move only with checkpoints: a crash loses the steps since the last checkpoint and
   replays their trajectories; versions published since keep their numbers (the restart numbers on from
   the newest version on disk or announced, and re-publishes it).

One trainer per run (per resource id), enforced by the broker: everything it writes (versions, heartbeats,
acks, dead letters) and its offset commits go through its `RoleWriter` (seamlessflow.kafka.fencing), in
transactions committed every loop turn, before a step. A trainer started while this one is frozen fences
it; this one, woken, fails its next commit (`Fenced`: the process exits non-zero), so it publishes no
version and moves no offset, and its checkpoint is never named `latest` (seamlessflow/trainer/checkpoints.py).

No shared file system is assumed: with `serve_weights` the leader serves its weights root over HTTP and
announces `http://` URIs (seamlessflow/trainer/versions.py); with `checkpoint_uri` every checkpoint also
goes to a store, and a start on a node without it resumes from the store's newest
(seamlessflow/trainer/checkpoints.py). A restart whose newest version has no announced files here (they
stayed behind on another node, or no committed record names them: a fenced trainer's) exports the restored
weights as the next version at once, so engines have one to load.

With several data-parallel ranks, rank 0 (the leader, `Trainer`) is the trainer above: it alone reads
Kafka and the control topic, forms batches, writes weights, publishes and commits. Every loop turn it
broadcasts an order to the other ranks (nothing, step, export, checkpoint, stop), each a `Follower`
(seamlessflow/trainer/follower.py) that takes its share of the step and its part of the collective saves
(ZeRO-3's gather of the weights, DeepSpeed's checkpoint). `start_rank` builds the right one on each rank. What a
checkpoint carries besides DeepSpeed's own is the leader's `TrainerState` (seamlessflow/trainer/state.py).
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING

from seamlessflow.config import Settings
from seamlessflow.core.batching import BatchBuilder, Counters
from seamlessflow.core.mixing import source_figures
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.command_feed import CommandFeed
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.fencing import RoleWriter
from seamlessflow.kafka.heartbeat import Heartbeat
from seamlessflow.kafka.io import DeliveryFailed
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import ControlCommand, ResourceStatus, WeightVersion, now_ms
from seamlessflow.model.lora import ADAPTER_FORMAT
from seamlessflow.topics import Topics
from seamlessflow.trainer.adapter import save_adapter_version
from seamlessflow.trainer.checkpoints import (
    STEP_LOG,
    checkpoint_store,
    fetch_newest,
    mark_complete,
    name_latest,
    prune_tags,
    upload_part,
)
from seamlessflow.trainer.checkpoints import tag as checkpoint_tag
from seamlessflow.trainer.commands import ControlState
from seamlessflow.trainer.follower import Follower, Order, OrderKind
from seamlessflow.trainer.mismatch_watch import MismatchWatch
from seamlessflow.trainer.model import zero_stage
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.own_samples import OwnSamples
from seamlessflow.trainer.policy_engine import PolicyEngine, StepMetrics
from seamlessflow.trainer.samples import sample_from_record
from seamlessflow.trainer.source import Incoming, TrajectorySource
from seamlessflow.trainer.state import TrainerState
from seamlessflow.trainer.step_log import append_steps, cut_after, fmt_figures
from seamlessflow.trainer.versions import newest_announced, uri_name, version_uri, weights_server
from seamlessflow.weights.files import (
    PendingVersion,
    WeightWriter,
    latest_version,
    prune_versions,
    save_weights,
    version_dir,
)
from seamlessflow.weights.snapshot import host_snapshot, snapshot_needed

if TYPE_CHECKING:
    from seamlessflow.weights.transfer import EngineTransfer

log = logging.getLogger("seamlessflow.trainer")


class Trainer:
    """The leader rank (rank 0, the only one of a one-rank group): reads Kafka and the control topic, forms
    the batches, publishes versions and records, checkpoints and commits; the other ranks are `Follower`s."""

    def __init__(self, settings: Settings, options: TrainerOptions | None = None, engine: PolicyEngine | None = None):
        self.settings = settings
        self.options = options or TrainerOptions.from_settings(settings).with_model(settings)
        self.topics = Topics(settings)
        self.codec = codec_for(settings)
        self.work = self.options.work_dir(settings)
        self.weights_root = self.work / "weights"
        self.checkpoints = self.options.checkpoint_dir(settings)
        self.steps_log = self.work / "steps.jsonl"
        self.work.mkdir(parents=True, exist_ok=True)
        self.control = ControlState(self.options.resource_id, settings.team, settings.run, self.options.initial_role,
                                    settings.generation)
        self.team_adapter = self.options.team_adapter(settings)  # None: it trains the base
        self.engine = engine or PolicyEngine.from_options(self.options, self.team_adapter)
        adapter = self.team_adapter  # its samples only (`own_samples`): the adapter's team's, or the base's
        self.own = OwnSamples(adapter.name if adapter else None, self.options.adapter if adapter else None)
        self.ranks = self.engine.ranks
        if not self.ranks.leader:
            raise ValueError(f"rank {self.ranks.rank} is a follower: it runs `Follower`, not the trainer loop")
        self.producer = RoleWriter(settings, self.codec, f"trainer.{self.options.resource_id}")  # fences older ones
        self.incarnation = uuid.uuid4().hex[:6]  # names this process's checkpoint tags and version directories
        self.dead_letters = DeadLetters(settings, self.codec, "trainer", self.producer.send)
        self.transfer = self._engine_transfer()
        self.heartbeat = Heartbeat(self.producer.send, self.topics.status, self.options.heartbeat_s,
                                   lambda: self._status(ResourceState.ACTIVE))
        self.last_metrics: StepMetrics | None = None
        self.mismatch_watch = MismatchWatch.of(self.options)
        self.busy_s = 0.0  # seconds in optimizer steps and publishing (heartbeat figure; timeline's train time)
        self.publish_time_s = self.publish_wait_s = self.checkpoint_time_s = 0.0  # the last ones (heartbeat)
        self.stopping = False
        self.writer = WeightWriter()
        self.weights_server = weights_server(self.options, self.weights_root)  # started by `run`
        self.store = checkpoint_store(self.options)
        state = self._restore()
        self.step = state.step
        self._number_versions(state)
        self.announced_version = self.version  # re-published at start (run)
        self._checkpointed = (self.step, time.monotonic())
        self._checkpointed_version = self.version
        cut_after(self.steps_log, self.step)
        self.builder = self._batch_builder(state)
        self._counters_at_step = Counters()
        self._offsets_by_id: dict[str, tuple[int, int]] = {}  # held samples -> where to finish them
        self._trained_since_publish: list[dict] = []
        self.source = TrajectorySource(settings, self.codec, self.topics.trajectories,
                                       self.options.group_id(settings), self.dead_letters, state.offsets,
                                       self.options.fetch_queue_mib, writer=self.producer)
        log.info("trainer %s at step %d, version %d, offsets %s, %d rank(s), incarnation %s", self.options.resource_id,
                 self.step, self.version, state.offsets, self.ranks.world, self.incarnation)

    def _restore(self) -> TrainerState:
        """The newest checkpoint (from the store when this node lacks it, with its step log)."""
        if fetch_newest(self.store, self.checkpoints, self.ranks) and self.store is not None:
            self.store.download_file(STEP_LOG, self.steps_log)
        return TrainerState.from_dict(self.engine.load_checkpoint(self.checkpoints) or {})

    def _number_versions(self, state: TrainerState) -> None:
        """Versions number on from the newest checkpointed, on disk or announced: never backwards, even on a
        node without the old work dir. The newest is announced again at start (`run`) when a committed record
        names it and its files (if any) are here; otherwise (its files are on another node, or only a fenced
        trainer's directory holds it) the restored weights are exported as the next version at start."""
        announced = newest_announced(self.settings, self.codec, self.topics.weights, self.options.resource_id)
        self.version = max(state.version, latest_version(self.weights_root), announced.version if announced else 0)
        whole = announced is not None and announced.version == self.version and (
            not announced.uri or (self.weights_root / uri_name(announced.uri)).is_dir())
        self._announced = announced if whole else None

    def _engine_transfer(self) -> EngineTransfer | None:
        if self.options.weight_transfer == "none":
            return None
        if (self.options.weight_transfer == "nccl" and self.ranks.world > 1
                and zero_stage(self.options.deepspeed_dict()) == 3):
            raise ValueError("weight_transfer nccl under ZeRO-3 on several ranks needs every rank to join each "
                             "bucket's gather, which the follower ranks do not do yet: use gloo or files")
        from seamlessflow.weights.engine_client import transfer_client
        from seamlessflow.weights.transfer import EngineTransfer  # imports vLLM: only when configured

        return EngineTransfer(self.settings, self.codec, self.producer, self.options.weight_transfer,
                              self.options.transfer_host, self.options.transfer_bucket_mb << 20,
                              self.options.resource_id, transfer_client, timeout_s=self.options.transfer_timeout_s)

    def _batch_builder(self, state: TrainerState) -> BatchBuilder:
        """The builder as the checkpoint left it: what was trained above the offsets is not trained again."""
        return BatchBuilder(self.options.batch_config(), seen_ids=state.finished_ids,
                            too_easy_tasks=state.too_easy_tasks)

    # -- the loop ---------------------------------------------------------------------------------------

    def run(self) -> int:
        listener = CommandFeed(self.settings, self.codec, self.dead_letters, self.topics.control,
                               self.control.protocol.addressed)
        restored = self.control.restore(listener.history())
        if restored is not None:
            self._apply(restored)
        if self.weights_server is not None:
            self.weights_server.start()
            log.info("serving versions at %s", self.weights_server.url)
        if self._announced is not None:  # idempotent: the same record again
            self.producer.deliver(self.topics.weights, self.settings.run, self._announced)
        elif self.version > 0:
            self._export_version()  # no committed record names files of the newest version here
            self._announce_written(self.writer.drain())
        stepped = False
        try:
            while not self.stopping:
                for command in listener.commands():
                    self._apply(command)
                # right after a step another batch may be waiting: no wait then (a reader paused because it is
                # ahead would otherwise spend the whole timeout between two steps for records it will not take)
                self._take(self.source.poll(0.0 if stepped else 0.2))
                self._hold_back_when_ahead()
                self._announce_written(self.writer.written())
                if self.transfer is not None:
                    self.transfer.catch_up()  # engines that started, restarted or came back from train
                self.heartbeat.beat()  # last, so the turn's transaction is open from here to the commit only
                self._commit_turn()
                started = time.perf_counter()
                stepped = self.control.role == Tag.TRAIN and self._train_if_ready()
                if stepped:
                    self.busy_s += time.perf_counter() - started
                    self.heartbeat.soon()  # a heartbeat after every step: the step's figures reach the trackers
                    if self.options.max_steps is not None and self.step >= self.options.max_steps:
                        break
                else:
                    self.ranks.broadcast(None)  # followers wait in this call; a turn without work still ends it
            if self.step > self._checkpointed[0]:  # a clean stop keeps what was trained since the last one
                self._checkpoint_and_commit()
            self._announce_written(self.writer.drain())
        finally:
            self.writer.close()
            if self.weights_server is not None:
                self.weights_server.stop()
            if self.transfer is not None:
                self.transfer.close()
            self._stop_followers()
            self.heartbeat.publish(self._status(ResourceState.STOPPED))
            self.producer.flush()
            listener.close()
            self.source.close()
        return 0

    def _commit_turn(self) -> None:
        """What the turn wrote (acks, heartbeat, dead letters) becomes visible before a step: left open, it would
        hold back every read_committed reader of its partitions. Lost to a broker away for long, it is logged
        and the loop goes on (the next heartbeat tells the same); fenced, the trainer stops (`Fenced`)."""
        try:
            self.producer.commit(10.0)
        except DeliveryFailed as exc:
            log.warning("this turn's records were not committed: %s", exc)

    def _stop_followers(self) -> None:
        """Lets the followers exit cleanly; if a rank died the group is already broken and the launcher
        stops the rest, so a failure here changes nothing."""
        try:
            self.ranks.broadcast(Order(OrderKind.STOP))
        except Exception as exc:  # noqa: BLE001  a dead peer: gloo raises whatever its transport saw
            log.warning("could not tell the other ranks to stop: %s", exc)

    def _take(self, records: list[Incoming]) -> None:
        """Feeds records to the batch builder; anything it will not train is finished at once."""
        if self.source.revoked:
            self._rebuild_after_revoke()
        now = time.time()
        for item in records:
            if self.own.passes_over(item.trajectory):
                self.source.done(item.partition, item.offset)
            elif self.builder.add(sample_from_record(item.trajectory), now):
                self._offsets_by_id[item.trajectory.event_id] = (item.partition, item.offset)
            else:
                self.source.done(item.partition, item.offset)

    def _hold_back_when_ahead(self) -> None:
        """Reads on only while fewer than `prefetch_steps` batches are judged and waiting: a trainer slower
        than the agents would otherwise hold the whole backlog in memory (the soak's trainer grew without
        end); Kafka keeps it instead, and the samples taken are fresher when their step comes."""
        ahead = self.builder.steps_ready() >= self.options.prefetch_steps
        self.source.set_reading(self.control.role == Tag.TRAIN and not ahead)

    def _rebuild_after_revoke(self) -> None:
        """Partitions moved: held samples are dropped and read again from the committed offsets."""
        self.builder.forget_pending()
        self._offsets_by_id = {}
        self.source.revoked = False

    def _finish(self, trajectory_ids: Iterable[str]) -> None:
        for tid in trajectory_ids:
            where = self._offsets_by_id.pop(tid, None)
            if where is not None:
                self.source.done(*where)

    def _train_if_ready(self) -> bool:
        result = self.builder.poll(self.version, time.time())
        self._finish(s.trajectory_id for s in result.discarded)
        if not result.batch:
            return False
        self.ranks.broadcast(Order(OrderKind.STEP))
        metrics = self.engine.train_step(result.batch, self.version)
        self.mismatch_watch.check(metrics, self.step + 1)
        self.step += 1
        trained = [s.trajectory_id for g in result.batch for s in g.samples]
        self._finish(trained)
        sources = source_figures(result.batch)  # per task source: groups, samples, tokens, mean reward
        self._trained_since_publish.append(
            {
                "step": self.step,
                "trajectory_ids": trained,
                "tokens_trained": metrics.tokens_trained,
                "positions": metrics.positions,  # below flat_positions when shared prefixes were computed once
                "flat_positions": metrics.flat_positions,
                "positions_largest_rank": metrics.positions_largest_rank,  # the step's balance across ranks
                "reward_mean": metrics.reward_mean,
                "finished_at_ms": now_ms(),
                "sources": sources,
            }
        )
        self.last_metrics = metrics
        counts = self.builder.counters.minus(self._counters_at_step)
        self._counters_at_step = Counters(**vars(self.builder.counters))
        log.info("step %d: %s | %s | %s", self.step, fmt_figures(metrics.figures()), fmt_figures(vars(counts)),
                 "; ".join(f"{name}: {fmt_figures(figures)}" for name, figures in sorted(sources.items())))
        if self.step % self.options.publish_every == 0:
            self._publish_step()
        return True

    def _publish_step(self) -> None:
        """Exports version N+1, then checkpoints when one is due."""
        self._export_version()
        versions_since = self.version - self._checkpointed_version
        minutes = self.options.checkpoint_minutes
        if versions_since >= self.options.checkpoint_every or (
                minutes is not None and time.monotonic() - self._checkpointed[1] >= minutes * 60):
            self._checkpoint_and_commit()

    def _export_version(self) -> None:
        """Exports version N+1 (a host snapshot: the part on the step's critical path) and hands it to the
        background writer; it is announced once written (`_announce_written`)."""
        start = time.perf_counter()
        self.version += 1
        self.ranks.broadcast(Order(OrderKind.EXPORT))
        version, root, base = self.version, self.weights_root, self.options.model_path
        save = partial(save_weights, self.engine.module) if self.engine.adapter is None else \
            partial(save_adapter_version, self.engine.adapter)  # an adapter's version: a PEFT directory
        state: dict = {}
        if snapshot_needed(self.options.weight_transfer, version, self.options.files_every):
            state = host_snapshot(self.engine.export_state())
        if self.transfer is not None:  # returns once every serving engine has it or is routed out
            self._deliver(version, state)
        if self.transfer is None or version % self.options.files_every == 0:
            self.publish_wait_s = self.writer.submit(
                version, self.step, lambda: save(root, version, base, state, self.incarnation))
        else:  # transfer only: announced now, after the versions before it (in order)
            self.publish_wait_s = 0.0
            self._announce_written(self.writer.drain())
            self._publish_version(version, self.step)
            self.announced_version = version
        for entry in self._trained_since_publish:
            entry.setdefault("version", self.version)  # the first version whose weights include that step
        self.publish_time_s = time.perf_counter() - start
        log.info("version %d exported in %.2f s on the step's path (%.2f s of it waiting for the previous "
                 "write)", self.version, self.publish_time_s, self.publish_wait_s)

    def _deliver(self, version: int, state: dict) -> None:
        """Version `version` into the serving engines: the host snapshot over gloo; with NCCL the module's
        own device memory, bucket by bucket (no host copy; `weights.device_source`)."""
        assert self.transfer is not None
        if self.options.weight_transfer != "nccl":
            self.transfer.deliver(version, state)
            return
        from seamlessflow.weights.device_source import DeviceBucketSource  # imports vLLM: only when configured

        source = DeviceBucketSource(self.engine.module, self.options.transfer_bucket_mb << 20)
        self.transfer.deliver(version, source, lasting=False)

    def _announce_written(self, written: list[PendingVersion]) -> None:
        """Publishes each version whose directory is complete, in order, then prunes old directories."""
        for pending in written:
            self._publish_version(pending.version, pending.step)
            prune_versions(self.weights_root, self.options.keep_weight_versions, pending.version, self.incarnation)
            self.announced_version = pending.version
            log.info("published version %d", pending.version)

    def _checkpoint_and_commit(self) -> None:
        """A full checkpoint under a tag of this process (every rank saves its part), then the offsets it
        carries are committed in this trainer's transaction, and only then is it named `latest`: a trainer
        fenced by a newer one raises `Fenced` at the commit, so its checkpoint is never named, nor written over
        the newer one's. The versions being written finish first, so the version the checkpoint names is on
        disk."""
        start = time.perf_counter()
        self._announce_written(self.writer.drain())
        tag = checkpoint_tag(self.step, self.incarnation)
        self.ranks.broadcast(Order(OrderKind.CHECKPOINT, tag))
        self._checkpoint(tag)
        if self._committed():
            self._name_checkpoint(tag)
        else:
            log.warning("checkpoint %s not named: its offsets did not commit (a restart takes the one before)", tag)
        self._checkpointed = (self.step, time.monotonic())
        self._checkpointed_version = self.version
        self.checkpoint_time_s = time.perf_counter() - start
        log.info("checkpoint at step %d (version %d) in %.2f s", self.step, self.version, self.checkpoint_time_s)

    def _checkpoint(self, tag: str) -> None:
        """Every rank's part of `tag`, on this node and in the store (not named yet)."""
        state = TrainerState(self.step, self.version, self.source.commit_points(),
                             self.source.finished_above_commit(), list(self.builder.too_easy_tasks))
        self.engine.save_checkpoint(self.checkpoints, tag, state.to_dict())
        upload_part(self.store, self.checkpoints, tag, self.ranks)

    def _committed(self) -> bool:
        """Whether the checkpoint's transaction committed: its offsets, and a heartbeat so that it reaches the
        broker (and is refused there if this trainer was fenced) even with no offsets to move. Refused for now
        (a rebalance, the broker away), the checkpoint is not named and the last named one stays: a restart
        replays more and loses nothing. Fenced: `Fenced` raises."""
        self.heartbeat.beat(force=True)
        try:
            if not self.source.commit() and self.source.commit_points():
                return False  # the group refused the offsets for now (logged by the subscriber)
            self.producer.commit()  # the heartbeat alone, when there were no offsets
        except DeliveryFailed as exc:
            log.warning("checkpoint transaction not committed: %s", exc)
            return False
        return True

    def _name_checkpoint(self, tag: str) -> None:
        """After the commit: the steps it holds logged, `latest` naming it here and in the store, the other
        tags pruned."""
        append_steps(self.steps_log, self.version, self._trained_since_publish)  # durable now (`step_log`)
        self._trained_since_publish = []
        name_latest(self.checkpoints, tag)
        mark_complete(self.store, tag, self.steps_log, self.options.keep_checkpoints)
        (self.work / "too_easy_tasks.json").write_text(json.dumps(list(self.builder.too_easy_tasks)))
        prune_tags(self.checkpoints, tag, self.options.keep_checkpoints)

    # -- records ----------------------------------------------------------------------------------------

    def _publish_version(self, version: int, step: int) -> None:
        files = version_dir(self.weights_root, version, self.incarnation)  # none for a version sent by transfer only
        record = WeightVersion(
            event_id=f"{self.settings.run}/{self.options.resource_id}/v{version}", version=version,
            uri=version_uri(files, self.weights_server), step=step,
            format="hf-safetensors" if self.team_adapter is None else ADAPTER_FORMAT,
            adapter=self.team_adapter.name if self.team_adapter is not None else None,
            trainer_id=self.options.resource_id, team=self.settings.team, run=self.settings.run,
            created_at_ms=now_ms(),
        )
        # patient: a broker that restarts just now must not kill the trainer (seen in a full-stack chaos run)
        self.producer.deliver(self.topics.weights, self.settings.run, record)

    def _apply(self, command: ControlCommand) -> None:
        decision = self.control.decide(command)
        if decision.role is not None:
            self._hold_back_when_ahead()  # the one rule for reading: in train and not ahead
            log.info("role -> %s (epoch %d)", decision.role, command.epoch)
        if decision.shutdown:
            self.stopping = True
        self.producer.send(self.topics.status, f"{self.options.resource_id}/ack", decision.ack)
        self.heartbeat.beat(force=True)

    def _status(self, state: ResourceState) -> ResourceStatus:
        figures = {"step": float(self.step), "pending_samples": float(len(self.builder.pending_samples)),
                   "too_easy_tasks": float(len(self.builder.too_easy_tasks)),
                   "publish_time_s": self.publish_time_s, "publish_wait_s": self.publish_wait_s,
                   "checkpoint_time_s": self.checkpoint_time_s,
                   "busy_s": self.busy_s, "ranks": float(self.ranks.world),
                   "steps_ready": float(self.builder.steps_ready()), "read_up": float(self.source.read_up)}
        figures.update(self.own.figures())
        if self.transfer is not None:  # measured per version: the scheduler prices switches with it
            figures.update(
                {"weight_update_s": self.transfer.update_s, "transfer_engines": float(len(self.transfer.pids))}
            )
        figures.update({f"total_{k}": float(v) for k, v in vars(self.builder.counters).items()})
        if self.last_metrics is not None:
            figures.update(self.last_metrics.figures())
        return resource_status(
            self.options.resource_id,
            ResourceKind.TRAINER,
            state,
            self.control.role,
            self.settings.team,
            self.settings.run,
            capability_tags=[Tag.TRAIN],
            weight_version=self.announced_version,
            figures=figures,
            epoch=max(self.control.epoch, 0),
        )

def start_rank(settings: Settings) -> Trainer | Follower:
    """This rank's part of the trainer group: the leader's loop on rank 0, a follower's on the others (each
    has `run()`; the leader stops when its `stopping` is set, the followers when the leader orders it)."""
    options = TrainerOptions.from_settings(settings).with_model(settings)
    engine = PolicyEngine.from_options(options, options.team_adapter(settings))
    if not engine.ranks.leader:
        return Follower(engine, options.checkpoint_dir(settings), checkpoint_store(options))
    return Trainer(settings, options, engine)

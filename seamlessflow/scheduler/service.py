"""The scheduler service: rebuild from the topics, then fold records and run the policy every tick.

Inputs: status (ResourceStatus heartbeats, CommandAcks), weights (WeightVersion), trajectories and tasks
(pipeline figures). Outputs: ControlCommands on the control topic (key = resource id, epochs only grow),
Tasks on the tasks topic (rollout manager), a `failed` ResourceStatus for each resource whose heartbeats
stopped, and the scheduler's own heartbeat (kind `scheduler`: policy, trainer version, pipeline figures, and
with `scheduler.autoscale.enabled` the autoscaling advice: `scheduler.autoscaling`).

One scheduler per run, enforced by the broker: its producer is the run's scheduler `RoleWriter`
(seamlessflow.kafka.fencing), so a replacement fences this process before it rebuilds, and a tick's
commands, tasks and heartbeat commit together at the tick's end (`flush`) or, fenced, not at all: an old
scheduler that wakes after its replacement started issues nothing anyone reads, and exits.

Restart: every input is read from the beginning with `read_topic` (the compacted control/status/weights
topics hold the latest record per key; the ack key is "<resource_id>/ack"), so the next epoch for a
resource is above every epoch published before, and the manager knows which groups it already published.

Pipeline figures. `buffered` (trajectories waiting for the trainer) and `training` come from the trainer's
heartbeat figures when a trainer reports them (figures `buffered`, `training`); otherwise `buffered` is
the number of trajectories that arrived since the newest WeightVersion, less those of groups the trainer
will skip (no signal: the manager's judgement), and `training` is false.
`queued_tasks`/`in_flight` are the manager's groups published and not finished (0 without a manager).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.evaluation import is_eval_group
from seamlessflow.core.policies import Command, Pause, PipelineState, Resume, get_policy
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.core.scheduler import Scheduler
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.dead_letters import DeadLetters
from seamlessflow.kafka.fencing import RoleWriter
from seamlessflow.kafka.heartbeat import Heartbeat
from seamlessflow.kafka.records import resource_status
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import (
    CommandAck,
    ControlCommand,
    EpisodeEnd,
    ResourceStatus,
    Task,
    Trajectory,
    WeightVersion,
    now_ms,
)
from seamlessflow.scheduler.autoscaling import LiveAutoscaler
from seamlessflow.scheduler.commands import describe, to_message
from seamlessflow.scheduler.manager import RolloutManager, task_set
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.proxy_sync import ProxySync
from seamlessflow.scheduler.reading import records_until
from seamlessflow.scheduler.train_turns import TrainTurns
from seamlessflow.scheduler.view import ClusterView
from seamlessflow.topics import Topics
from seamlessflow.trainer.adapter_trainers import adapter_trainers

log = logging.getLogger("seamlessflow.scheduler")


class SchedulerService:
    def __init__(self, settings: Settings, options: SchedulerOptions | None = None,
                 manager: ManagerOptions | None = None, codec: Codec | None = None,
                 clock: Callable[[], float] = time.monotonic):
        self.settings, self.clock = settings, clock
        self.options = options or SchedulerOptions.from_settings(settings)
        manager = manager or ManagerOptions.from_settings(settings)
        self.codec = codec or codec_for(settings)
        self.topics = Topics(settings)
        self.spec = get_policy(self.options.policy)
        # where the teams' adapters train instead of the base, each team's rollouts are its adapter's: a
        # staleness ledger and a backlog per adapter (the base's for every other team)
        trainers = adapter_trainers(settings)
        policy_of = {t.team: t.adapter for t in trainers}
        self.view = ClusterView(frozenset(self.options.resource_kinds), self.options.command_timeout_s,
                                self.options.rate_window_s, batch_trajectories=self.options.batch_threshold,
                                policy_of=policy_of, trainer_of={t.resource_id: t.adapter for t in trainers})
        self.scheduler = Scheduler(self.options.policy, clock, self.options.scheduler_config(), self.view.epochs)
        staleness = self.spec.max_staleness if manager.max_staleness is None else manager.max_staleness
        self.manager = RolloutManager(manager, task_set(manager), settings.team, settings.run,
                                      self.options.batch_threshold, staleness, clock, policy_of) \
            if manager.enabled else None
        # the run's team and those its task sources publish for (`manager.sources[].team`): their records are ours
        self.teams = self.manager.teams if self.manager else frozenset({settings.team})
        self._run_team = frozenset({settings.team})
        self.proxy_sync = ProxySync(self.options.command_timeout_s)
        autoscale = self.options.autoscale
        self.autoscaler = LiveAutoscaler(autoscale, self.options.heartbeat_timeout_s) if autoscale.enabled else None
        share = self.options.train_share  # turns by team weight, where the teams' adapter trainers share devices
        self.train_turns = TrainTurns(share, trainers, self.options.heartbeat_timeout_s, self.options.min_dwell_s) \
            if share.enabled and trainers else None
        # the one scheduler of this run: a newer one fences this one's commands and tasks (before it rebuilds)
        self.producer = RoleWriter(settings, self.codec, f"scheduler.{self.options.resource_id}")
        self.dead_letters = DeadLetters(settings, self.codec, "scheduler", self.producer.send)
        self.heartbeat = Heartbeat(self.producer.send, self.topics.status, 0.0, self._status)  # one per tick
        self.published: list[ControlCommand] = []  # this process's commands, newest last (for tests/logs)
        self._offsets: dict[tuple[str, int], int] = {}

    # -- rebuild ------------------------------------------------------------------------------------------

    def rebuild(self) -> None:
        """Fold every input topic from the beginning; epochs continue above the control topic's maximum.

        Reading stops at the first record produced after the rebuild began (see scheduling.reading); the
        live consumer continues from the next offset, so nothing is skipped."""
        started_ms = now_ms()
        for record in records_until(self.settings, self.topics.control, self.codec, started_ms, poison=True):
            command = self.dead_letters.decode_record(record)
            if isinstance(command, ControlCommand):
                issued = self.view.epochs.issued
                issued[command.resource_id] = max(issued.get(command.resource_id, 0), command.epoch)
        for topic in self._input_topics():
            for record in records_until(self.settings, topic, self.codec, started_ms, poison=True):
                message = self.dead_letters.decode_record(record)
                if message is not None:
                    self.fold(message)
                self._offsets[(topic, record.partition)] = record.offset + 1
        log.info("rebuilt: %d resources, epochs %s, version %d", len(self.view.tracked),
                 self.view.epochs.issued, self.view.current_version)

    # -- folding ------------------------------------------------------------------------------------------

    def fold(self, message: Any) -> None:
        now = self.clock()
        if getattr(message, "team", self.settings.team) not in self._teams_of(message):
            return
        if getattr(message, "run", self.settings.run) != self.settings.run:
            return
        if is_eval_group(getattr(message, "group_id", "") or ""):  # eval sessions are neither rollout nor data
            return
        if isinstance(message, ResourceStatus):
            self.view.on_status(message, now)
        elif isinstance(message, CommandAck):
            self.view.on_ack(message)
        elif isinstance(message, WeightVersion):
            self.view.on_weights(message)
        elif isinstance(message, Trajectory):
            self.view.on_trajectory(now, message.team)
            if self.manager:
                self.manager.on_trajectory(message, self.view.current_version, self.view.adapter_versions)
        elif isinstance(message, Task) and self.manager:
            self.manager.on_task(message)
        elif isinstance(message, EpisodeEnd) and self.manager:
            self.manager.on_episode_end(message)
        if self.manager:
            for policy, unusable in self.manager.take_unusable(self.view.current_version,
                                                                 self.view.adapter_versions).items():
                self.view.discount(unusable, policy)

    def _teams_of(self, message: Any) -> frozenset[str]:
        """Whose records of this kind are this scheduler's: the stack's resources, acks and weights are the run's
        team's; tasks, trajectories and session ends also those of the teams its task sources publish for."""
        return self.teams if isinstance(message, (Task, Trajectory, EpisodeEnd)) else self._run_team

    def _input_topics(self) -> tuple[str, ...]:
        t = self.topics
        return (t.status, t.weights, t.tasks, t.trajectories) + ((t.session_events,) if self.manager else ())

    # -- one tick -----------------------------------------------------------------------------------------

    def pipeline(self) -> PipelineState:
        buffered = self.view.trainer_figure("buffered")
        training = self.view.trainer_figure("training")
        outstanding = self.manager.outstanding if self.manager else 0
        update_s = self.view.trainer_figure("weight_update_s")  # measured per version (weights/transfer.py)
        return PipelineState(
            queued_tasks=outstanding, in_flight=outstanding,
            buffered=int(buffered if buffered is not None else self.view.trajectories_since_version),
            batch_threshold=self.options.batch_threshold, current_version=self.view.current_version,
            training=bool(training), max_staleness=self.spec.max_staleness,
            trajectory_rate=self.view.trajectory_rate(self.clock()), weight_update_s=update_s or 0.0,
        )

    def tick(self) -> list[ControlCommand]:
        now = self.clock()
        roles = self.train_turns.step(self.view, now) if self.train_turns else None
        stamped, failed = self.scheduler.step(self.view.resources(now), self.pipeline(), roles)
        for resource_id in failed:
            self._publish_failed(resource_id)
        pairs = [(item.epoch, item.command) for item in stamped]
        proxy_commands: list[tuple[int, Command]] = []
        if self.options.coordinate_proxy:
            gone = {rid for rid, t in self.view.tracked.items() if t.reported.state is ResourceState.FAILED}
            proxies = self.view.live_proxies(now, self.options.heartbeat_timeout_s)
            pairs, proxy_commands = self.proxy_sync.filter(proxies, pairs, self.view.epochs, now, gone,
                                                           self.view.stranded_proxies())
        messages = [self._send(e, c) for e, c in proxy_commands if isinstance(c, Pause)]
        for epoch, command in pairs:
            messages.append(self._send(epoch, command))
            self.view.on_issued(command, now)
        messages += [self._send(e, c) for e, c in proxy_commands if isinstance(c, Resume)]
        if self.manager:
            self.manager.expire()
            self.manager.advance_stage(self.view.trainer_figure("step") or 0.0, self.view.current_version)
            for task in self.manager.next_tasks(self.view.current_version, self.view.adapter_versions):
                self.producer.send(self.topics.tasks, task.group_id, task)
                self.manager.on_task(task)
        if self.autoscaler:  # advice only: logged and in the heartbeat's figures, acted on by nothing
            self.autoscaler.step(self.view, self.pipeline(), now)
        self.heartbeat.beat()
        self.producer.flush()
        self.published += messages
        return messages

    def _send(self, epoch: int, command: Command) -> ControlCommand:
        message = to_message(command, epoch, self.settings.team, self.settings.run, self.view.weights,
                             self.settings.generation)
        if isinstance(command, Resume) and command.resource_id in self.view.proxies:
            message.weight_version = self.proxy_sync.labelled_version  # the proxy labels tokens with it
        self.producer.send(self.topics.control, message.resource_id, message)
        log.info("command %s", describe(message))
        return message

    def _publish_failed(self, resource_id: str) -> None:
        """Record the verdict on the resource's own status key, so `status`, the timeline and a restarted
        scheduler see it; a fresh heartbeat from the resource replaces it."""
        self.view.mark_failed(resource_id)
        last = self.view.tracked[resource_id].status
        record = resource_status(
            resource_id,
            last.kind,
            ResourceState.FAILED,
            last.active_tag,
            self.settings.team,
            self.settings.run,
            capability_tags=last.capability_tags,
            weight_version=last.weight_version,
            figures={"marked_by_scheduler": 1.0},
            engine_url=last.engine_url,
            epoch=last.epoch,
            hardware_tags=last.hardware_tags,
        )
        self.producer.send(self.topics.status, resource_id, record)
        log.warning("resource %s stopped heartbeating: marked failed", resource_id)

    def _status(self) -> ResourceStatus:
        pipeline = self.pipeline()
        figures = {
            "buffered": float(pipeline.buffered),
            "batch_threshold": float(pipeline.batch_threshold),
            "trajectory_rate": pipeline.trajectory_rate,
            "commands": float(len(self.published)),
        }
        if self.manager:
            figures.update({k: float(v) for k, v in self.manager.figures().items()})
        if self.autoscaler:
            figures.update(self.autoscaler.figures())
        if self.train_turns:
            figures.update(self.train_turns.figures())
        return resource_status(
            self.options.resource_id,
            ResourceKind.SCHEDULER,
            ResourceState.ACTIVE,
            self.options.policy,
            self.settings.team,
            self.settings.run,
            weight_version=self.view.current_version,
            figures=figures,
            note=self.autoscaler.note() if self.autoscaler else None,
        )

    # -- the loop -----------------------------------------------------------------------------------------

    def run(self, stop: threading.Event | None = None) -> None:
        stop = stop or threading.Event()
        self.rebuild()
        consumer = self._live_consumer()
        try:
            next_tick = self.clock()
            while not stop.is_set():
                wait = max(0.0, next_tick - self.clock())
                for message in consumer.messages(wait, 500):
                    self.fold(message)
                if self.clock() >= next_tick:
                    self.tick()
                    next_tick = self.clock() + self.options.tick_s
        finally:
            consumer.close()
            self.producer.flush()

    def _live_consumer(self) -> Subscriber:
        """Assigned (no group: the scheduler is a singleton), continuing where the rebuild stopped."""
        consumer = Subscriber(self.settings, self.codec, self.dead_letters, name="scheduler")
        for topic in self._input_topics():
            consumer.follow(topic, {p: o for (t, p), o in self._offsets.items() if t == topic})
        return consumer


def run_service(settings: Settings, stop: threading.Event | None = None) -> None:
    SchedulerService(settings).run(stop)

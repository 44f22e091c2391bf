"""Fake resources that are real Kafka clients: they heartbeat ResourceStatus, obey ControlCommands keyed
by their id through the core's control protocol (the one every real resource uses), and acknowledge with
CommandAck. What they *run* is fake; the protocol with the scheduler is the real one."""

from __future__ import annotations

from collections.abc import Callable

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.control import Capabilities, CommandKind, ControlProtocol, Outcome, Reply
from seamlessflow.core.episodes import TrajectoryStatus
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import CommandAck, ControlCommand, ResourceStatus, Trajectory, WeightVersion, new_id, now_ms
from seamlessflow.testing import waiting
from seamlessflow.topics import Topics


class FakeCommands:
    """A fake resource's command layer: the core protocol, and nothing it carries out can fail. It takes
    every command kind in any role, `set_active` to its tags or idle, and a `resume` with a version labels
    it (as the proxy's does)."""

    def __init__(self, resource_id: str, tags: list[str], active: str, weight_version: int = 0):
        caps = Capabilities(dict.fromkeys(CommandKind), frozenset({*tags, active, "idle"}), resume_labels=True)
        self.protocol = ControlProtocol(resource_id, caps, active, aliases=(), weight_version=weight_version)
        self.applied: list[ControlCommand] = []

    def restore(self, history: list[ControlCommand]) -> ControlCommand | None:
        return self.protocol.restore(history)

    def handle(self, command: ControlCommand) -> Reply:
        reply = self.protocol.admit(command)
        if reply is not None:
            return reply
        self.applied.append(command)
        return self.protocol.settle(command, Reply(Outcome.OK))


class FakeResource:
    def __init__(self, settings: Settings, codec: Codec, resource_id: str, tags: list[str], active: str = "rollout",
                 kind: str = "rollout", weight_version: int = 0) -> None:
        self.settings, self.codec, self.id = settings, codec, resource_id
        self.tags, self.kind, self.alive = tags, kind, True
        self.commands = FakeCommands(resource_id, tags, active, weight_version)
        self.topics = Topics(settings)
        self.producer = MessageProducer(settings, codec)
        self.consumer = Subscriber(settings, codec, None, name="fake")
        history = self.consumer.catch_up(self.topics.control)  # then live after it, as resources do
        restored = self.commands.restore([m for m in history if self._mine(m)])
        if restored is not None:
            self._apply(restored)

    @property
    def applied(self) -> list[ControlCommand]:
        return self.commands.applied

    @property
    def active(self) -> str:
        return self.commands.protocol.view.active

    @property
    def state(self) -> str:
        return self.commands.protocol.view.state.value

    @property
    def weight_version(self) -> int:
        return self.commands.protocol.view.weight_version

    @property
    def epoch(self) -> int:
        return self.commands.protocol.epoch

    def heartbeat(self) -> None:
        status = ResourceStatus(new_id(), self.id, ResourceKind(self.kind), self.tags, self.active,
                                ResourceState(self.state), self.weight_version, {"tokens_per_s": 10.0},
                                self.settings.team, self.settings.run, now_ms(), None, self.epoch)
        self.producer.send_and_wait(self.topics.status, self.id, status)

    def pump(self) -> None:
        """Apply every new command addressed to this resource, ack it, then heartbeat."""
        if not self.alive:
            return
        for command in self.consumer.messages(0.05, 100):
            if self._mine(command):
                self._apply(command)
        self.heartbeat()

    def _mine(self, message: object) -> bool:
        return isinstance(message, ControlCommand) and message.resource_id == self.id

    def _apply(self, command: ControlCommand) -> None:
        reply = self.commands.handle(command)
        ack = CommandAck.answering(command, self.id, reply.outcome, reply.reason, 1.0, self.settings.team,
                                   self.settings.run)
        self.producer.send(self.topics.status, f"{self.id}/ack", ack)

    def close(self) -> None:
        self.consumer.close()


def wait_until(condition: Callable[[], bool], fakes: list[FakeResource], timeout_s: float = 60.0) -> None:
    """Pump the fakes until `condition` holds (the timeout only guards against a hang)."""
    def holds_or_pump() -> bool:
        if condition():
            return True
        for fake in fakes:
            fake.pump()
        return False

    waiting.wait_until(holds_or_pump, timeout_s, lambda: "the condition; fakes: " + ", ".join(
        f"{f.id}({f.active},{f.state},v{f.weight_version},e{f.epoch})" for f in fakes), every_s=0.05)


def trajectory(group_id: str, session: str, branch: int = 0, reward: float | None = None) -> Trajectory:
    """Rewards differ across sessions by default (a group with signal)."""
    reward = float(len(session)) if reward is None else reward
    return Trajectory(f"{session}/{branch}", session, branch, group_id, "t", "default", "default", [1, 2, 3],
                      [0, 1, 1], [0.0, -0.1, -0.1], [-1, 0, 0], reward, TrajectoryStatus.DONE, 1, 0, 0)


def publish_trajectories(settings: Settings, codec: Codec, group_id: str, sessions: list[str]) -> None:
    """Rewards differ across the sessions, so the group carries signal (the trainer would train it)."""
    producer = MessageProducer(settings, codec)
    for reward, session in enumerate(sessions):
        t = Trajectory(f"{session}/0", session, 0, group_id, group_id, settings.team, settings.run, [1, 2, 3],
                       [0, 1, 1], [0.0, -0.5, -0.5], [-1, 0, 0], float(reward), TrajectoryStatus.DONE, 1, 0, now_ms())
        producer.send(Topics(settings).trajectories, group_id, t)
    producer.flush()


def publish_weights(settings: Settings, codec: Codec, version: int) -> None:
    w = WeightVersion(new_id(), version, f"file:///weights/v{version}", version, "hf-safetensors", "trainer-0",
                      settings.team, settings.run, now_ms())
    MessageProducer(settings, codec).send_and_wait(Topics(settings).weights, settings.run, w)

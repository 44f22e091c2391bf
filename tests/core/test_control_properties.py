"""Every resource kind follows the one control protocol (`seamlessflow.core.control`), checked on random
command histories: re-deliveries, any delivery order, stale epochs, restarts that read back a compacted
control topic (any subset of what was published that keeps the newest record).

The real command layers are driven: the trainer's `ControlState`, the `RolloutWorker` (its engine and
engine client replaced by the recording stand-ins below), the proxy's `CommandHandler` (with its real
`PauseGate` and `EngineTable`) and the scheduling tests' `FakeCommands`. No Kafka: the adapters only read
records in and publish what these layers return. Each must give exactly the acks and end in the state that
the core protocol, fed the same deliveries and carrying out every admitted command successfully, predicts
for that kind's capabilities; and all four must agree on every epoch/duplicate verdict and the final epoch.
"""

from __future__ import annotations

import asyncio
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seamlessflow.core.control import ControlProtocol, Outcome, Reply
from seamlessflow.messages import CommandAck, ControlCommand
from seamlessflow.proxy.commands import CAPABILITIES as PROXY_CAPABILITIES
from seamlessflow.proxy.commands import CommandHandler
from seamlessflow.proxy.control_view import ALIASES as PROXY_ALIASES
from seamlessflow.proxy.generation import PauseGate
from seamlessflow.proxy.routing import EngineTable
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.worker import RolloutWorker, capabilities
from seamlessflow.testing.scheduler_fakes import FakeCommands
from seamlessflow.trainer.commands import CAPABILITIES as TRAINER_CAPABILITIES
from seamlessflow.trainer.commands import ControlState

RID = "r0"
VERSIONS = 40


class RecordingEngine:
    """Stand-in for `EngineProcess`: no vLLM, it only records starts and stops."""

    url, pid = "http://127.0.0.1:9", None

    def __init__(self):
        self.up, self.calls = False, []

    def running(self):
        return self.up

    def start(self, model_dir):
        self.up = True
        self.calls.append(("start", Path(model_dir).name))

    def stop(self, grace_s=20.0):
        self.up = False
        self.calls.append(("stop",))


class RecordingClient:
    """Stand-in for `EngineClient`: every engine call is recorded and succeeds."""

    def __init__(self):
        self.calls = []

    def __getattr__(self, name):
        return lambda *args, **kwargs: self.calls.append((name, *args)) or True


# -- one driver per resource kind: start from a history, take a delivery, say what state it is in ----------


class Trainer:
    caps, role = TRAINER_CAPABILITIES, "train"
    aliases = ()

    def start(self, history):
        self.control, self.stopped = ControlState(RID, "t", "r", role=self.role), False
        restored = self.control.restore(history)
        return [] if restored is None else [(restored, self.deliver(restored))]

    def deliver(self, command):
        decision = self.control.decide(command)
        self.stopped = self.stopped or decision.shutdown  # the trainer's loop ends
        return decision.ack

    def observe(self, model: ControlProtocol):
        seen = {"active": self.control.role, "stopped": self.stopped, "epoch": self.control.epoch}
        return seen, {"active": model.view.active, "stopped": model.stopping}


class Worker:
    role = "rollout"
    aliases = ("*",)

    def __init__(self, weights: Path):
        self.weights = weights
        self.options = RolloutOptions(workers={RID: {"capability_tags": ["rollout", "train"], "active_tag": "rollout"}},
                                      weight_load_methods=["restart"])
        self.caps = capabilities(self.options.worker(RID))

    def start(self, history):
        self.worker = RolloutWorker(RID, self.options, self.weights / "v0", self.weights, "t", "r",
                                    engine=RecordingEngine(), client=RecordingClient())
        self.worker.start()
        restored = self.worker.restore(history)
        return [] if restored is None else [(restored, self.deliver(restored))]

    def deliver(self, command):
        return self.worker.handle(command)

    def observe(self, model):
        w = self.worker
        seen = {"active": w.active_tag, "version": w.weight_version, "stopped": w.stopped, "epoch": w.epoch,
                "state": None if w.stopped else w.state, "engine_up": w.engine.running()}
        wanted = {"active": model.view.active, "version": model.view.weight_version, "stopped": model.stopping,
                  "state": None if model.stopping else model.view.state.value,
                  "engine_up": not model.stopping and model.view.active == "rollout"}
        return seen, wanted


class Proxy:
    caps, role, aliases = PROXY_CAPABILITIES, "proxy", PROXY_ALIASES

    def start(self, history):
        engines = EngineTable()
        engines.announce("e0", "http://127.0.0.1:9", True, 0)  # an engine's heartbeat: what labels show on
        self.acks = []
        self.handler = CommandHandler(RID, PauseGate(), engines, self._publish, "t", "r", drain_timeout_s=1.0)
        acks = self._run(self.handler.on_history, history)
        return [(_answered(ack, history), ack) for ack in acks]

    async def _publish(self, ack):
        self.acks.append(ack)

    def _run(self, call, argument):
        async def go():
            call(argument)
            while self.handler._tasks:
                await asyncio.gather(*self.handler._tasks)
        before = len(self.acks)
        asyncio.run(go())
        return self.acks[before:]

    def deliver(self, command):
        [ack] = self._run(self.handler.on_message, command)
        return ack

    def observe(self, model):
        [engine] = list(self.handler.engines)
        seen = {"paused": self.handler.gate.paused, "version": engine.version, "epoch": self.handler.last_epoch}
        return seen, {"paused": model.view.state.value == "paused", "version": model.view.weight_version}


class Fake:
    role, aliases = "rollout", ()

    def __init__(self):
        self.caps = FakeCommands(RID, ["rollout", "train"], "rollout").protocol.capabilities

    def start(self, history):
        self.fake = FakeCommands(RID, ["rollout", "train"], self.role)
        restored = self.fake.restore(history)
        return [] if restored is None else [(restored, self.deliver(restored))]

    def deliver(self, command):
        reply = self.fake.handle(command)  # what FakeResource's Kafka adapter acks
        return CommandAck.answering(command, RID, reply.outcome, reply.reason, 1.0, "t", "r")

    def observe(self, model):
        v = self.fake.protocol.view
        seen = {"active": v.active, "state": v.state, "version": v.weight_version, "epoch": self.fake.protocol.epoch}
        return seen, {"active": model.view.active, "state": model.view.state, "version": model.view.weight_version}


def _answered(ack, history):
    [command] = [c for c in history if c.event_id == ack.command_id]
    return command


# -- the reference: the core protocol alone, every admitted command carried out successfully ----------------


class Model:
    def __init__(self, kind):
        self.kind = kind

    def start(self, history):
        self.protocol = ControlProtocol(RID, self.kind.caps, self.kind.role, aliases=self.kind.aliases)
        restored = self.protocol.restore(history)
        return [] if restored is None else [(restored, self.deliver(restored))]

    def deliver(self, command):
        reply = self.protocol.admit(command)
        return reply if reply is not None else self.protocol.settle(command, Reply(Outcome.OK))


# -- histories -----------------------------------------------------------------------------------------------

ROLES = ("rollout", "train", "idle")


@st.composite
def published(draw):
    """What the scheduler publishes to one resource: epochs strictly growing (gaps where held commands gave
    theirs back), weight versions growing with them."""
    commands, epoch = [], 0
    for i in range(draw(st.integers(1, 12))):
        epoch += draw(st.integers(1, 2))
        kind = draw(st.sampled_from(["set_active", "set_active", "pause", "resume", "load_weights", "shutdown"]))
        fields = {}
        if kind == "set_active":
            fields["role"] = draw(st.sampled_from(ROLES))
        elif kind == "pause":
            fields["mode"] = draw(st.sampled_from([None, "keep", "wait"]))
        elif kind == "resume" and draw(st.booleans()):
            fields["weight_version"] = epoch
        elif kind == "load_weights":
            fields.update(weight_version=epoch, weight_uri=f"v{epoch}")
        commands.append(ControlCommand(f"c{i}", RID, epoch, kind, "t", "r", 0, **fields))
    return commands


@st.composite
def histories(draw):
    """(published commands, script): deliveries of any published command in any order and any number of
    times, and restarts that read a compacted topic holding any subset of the published prefix that keeps
    its newest record."""
    commands = draw(published())
    n = len(commands)
    script = []
    for _ in range(draw(st.integers(1, 25))):
        if draw(st.integers(0, 5)) == 0:
            upto = draw(st.integers(0, n))
            kept = [c for c in commands[: max(upto - 1, 0)] if draw(st.booleans())]
            script.append(("restart", kept + commands[upto - 1: upto]))
        else:
            script.append(("deliver", draw(st.integers(0, n - 1))))
    return commands, script


def play(resource, commands, script):
    """(command, ack or reply) for every answer the resource gave, restored commands included."""
    answers = resource.start([])
    for step, argument in script:
        if step == "restart":
            answers += resource.start(argument)
        else:
            answers.append((commands[argument], resource.deliver(commands[argument])))
    return answers


@pytest.fixture(scope="module")
def weights():
    with tempfile.TemporaryDirectory() as root:
        for version in range(VERSIONS):
            (Path(root) / f"v{version}").mkdir()
            (Path(root) / f"v{version}" / "config.json").write_text("{}")
        yield Path(root)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(history=histories())
def test_every_resource_kind_follows_the_one_protocol(weights, history):
    commands, script = history
    commands = [_with_uri(c, weights) for c in commands]
    verdicts, epochs = {}, {}
    for resource in (Trainer(), Worker(weights), Proxy(), Fake()):
        name = type(resource).__name__
        model = Model(resource)
        answers, expected = play(resource, commands, script), play(model, commands, script)
        assert [(c.event_id, a.command_id, a.epoch, a.outcome) for c, a in answers] == \
               [(c.event_id, c.event_id, c.epoch, r.outcome) for c, r in expected], name
        for (_, ack), (_, reply) in zip(answers, expected, strict=True):
            assert reply.ok or ack.reason == reply.reason, name  # refusals say the same thing everywhere
        seen, wanted = resource.observe(model.protocol)
        assert seen.pop("epoch") == model.protocol.epoch, name
        assert seen == wanted, name
        verdicts[name] = [(c.event_id, a.outcome == Outcome.IGNORED_STALE) for c, a in answers]
        epochs[name] = model.protocol.epoch
    assert len({tuple(v) for v in verdicts.values()}) == 1, verdicts
    assert len(set(epochs.values())) == 1, epochs


def _with_uri(command, weights):
    if command.weight_uri and not command.weight_uri.startswith("file:"):
        command.weight_uri = (weights / command.weight_uri).as_uri()
    return command

"""The audit of a stack that trains teams' adapters: each call served by its team's adapter, each trajectory trained
into its own team's adapter once, each trainer publishing versions of its one adapter and none of the base."""

import dataclasses

import pytest

from seamlessflow.assembler import AssemblerOptions
from seamlessflow.chaos.adapters import TeamAdapters
from seamlessflow.chaos.audit import audit
from seamlessflow.kafka.io import Record
from seamlessflow.messages import WeightVersion
from seamlessflow.replay.check import rebuild
from seamlessflow.replay.select import SessionEvents
from seamlessflow.testing.chaos_records import end, token_io

NAMES = {"red": "red-lora", "blue": "blue-lora"}  # green: no adapter, served the base
TRAINERS = {"red": "trainer-0-red", "blue": "trainer-0-blue"}


def records(topic, messages, codec):
    return [Record(topic, 0, i, None, codec.encode(m, topic), i, m) for i, m in enumerate(messages)]


def as_team(message, team):
    return dataclasses.replace(message, team=team, **({"adapter": NAMES.get(team)} if hasattr(message, "adapter")
                                                      else {}))


@pytest.fixture
def stack(codec):
    events = [as_team(m, team) for team, session in (("red", "r1"), ("blue", "b1"), ("green", "g1"))
              for m in (token_io(session, f"{session}c", [1, 2], [3, 4]), end(session))]
    session_events = records("t.session-events", events, codec)
    sessions = {}
    for record in session_events:
        sessions.setdefault(record.message.session_id, SessionEvents(record.message.session_id)).records.append(record)
    trajectories = records("t.trajectories", rebuild(list(sessions.values()), AssemblerOptions(), codec), codec)
    weights = records("t.weights", [WeightVersion(f"{team}1", 1, "file:///w", 1, "peft-lora", TRAINERS[team], team,
                                                  "r", 0, adapter=NAMES[team]) for team in NAMES], codec)
    steps = {"red": [{"step": 1, "version": 1, "trajectory_ids": ["r1/0"]}],
             "blue": [{"step": 1, "version": 1, "trajectory_ids": ["b1/0"]}]}
    return dict(session_events=session_events, trajectories=trajectories, weights=weights,
                adapters=TeamAdapters(NAMES, steps, TRAINERS))


def kinds(report):
    return {v.kind for v in report.violations}


def test_each_team_on_its_own_adapter_passes(stack):
    report = audit(**stack)
    assert report.ok, report.violations
    assert report.counts["trajectories trained into adapter red-lora"] == 1
    assert report.counts["calls served by adapter blue-lora"] == 1
    assert report.counts["trajectories not trained (pending or discarded)"] == 1  # green's: no adapter to train


def test_a_trajectory_in_another_teams_adapter_or_in_two_is_caught(stack):
    wrong = TeamAdapters(NAMES, {"red": [{"step": 1, "version": 1, "trajectory_ids": ["r1/0", "b1/0"]}],
                                 "blue": []}, TRAINERS)
    assert kinds(audit(**{**stack, "adapters": wrong})) == {"trained into the wrong adapter"}
    twice = TeamAdapters(NAMES, {"red": [{"step": 1, "version": 1, "trajectory_ids": ["r1/0"]}],
                                 "blue": [{"step": 1, "version": 1, "trajectory_ids": ["b1/0", "r1/0"]}]}, TRAINERS)
    assert kinds(audit(**{**stack, "adapters": twice})) == {"trained twice", "trained into the wrong adapter"}


def test_a_call_served_by_another_adapter_is_caught(stack, codec):
    first = stack["session_events"][0].message
    events = records("t.session-events", [dataclasses.replace(first, adapter="blue-lora"),
                                          *(r.message for r in stack["session_events"][1:])], codec)
    # and red's trajectory, published naming red's adapter, no longer names the adapter of the calls that wrote it
    assert kinds(audit(**{**stack, "session_events": events})) == {"served by the wrong adapter", "trajectory differs"}


def test_base_weights_or_another_adapters_version_from_a_trainer_are_caught(stack, codec):
    base = WeightVersion("x", 2, "file:///w", 2, "hf-safetensors", TRAINERS["red"], "red", "r", 0)
    other = WeightVersion("y", 3, "file:///w", 3, "peft-lora", TRAINERS["red"], "red", "r", 0, adapter="blue-lora")
    weights = stack["weights"] + records("t.weights", [base, other], codec)
    assert kinds(audit(**{**stack, "weights": weights})) == {"base published in an adapters stack",
                                                             "version of another adapter"}

"""The audit judges provenance: each trajectory names the adapter of the calls that generated it and carries their
temperatures and masked tokens, NaN logprobs compare equal, a leaf two adapters generated is dead-lettered (never
published), every call names its team's adapter in any stack, and no trainer trains another policy's samples.

Records are made the way the system makes them: session events as the proxy writes them, trajectories and dead
letters from the assembler's own `SessionBook`.
"""

import dataclasses
import struct

import pytest

from seamlessflow.assembler import AssemblerOptions, SessionBook
from seamlessflow.chaos.adapters import TeamAdapters
from seamlessflow.chaos.audit import audit
from seamlessflow.kafka.io import Record
from seamlessflow.testing.chaos_records import end, token_io

TOPIC = "t.session-events"
SERVED = {"red": "red-lora"}  # green: the base
OTHER_NAN = struct.unpack("<d", struct.pack("<Q", 0x7FF8000000000001))[0]  # a NaN of another payload


def records(topic, messages, codec):
    return [Record(topic, 0, i, None, codec.encode(m, topic), i, m) for i, m in enumerate(messages)]


def call(session, name, prompt, completion, team="red", adapter="red-lora", **fields):
    return dataclasses.replace(token_io(session, name, prompt, completion), team=team, adapter=adapter, **fields)


def assembled(events, codec):
    """What the assembler publishes for these events: (trajectory records, dead-letter records)."""
    book = SessionBook(AssemblerOptions(), codec, TOPIC)
    out = [book.on_record(r.partition, r.offset, r.key, r.value) for r in events]
    trajectories = [t for o in out for t in o.trajectories]
    letters = [d for o in out for d in o.dead_letters]
    return records("t.trajectories", trajectories, codec), records("t.dead-letters", letters, codec)


def stack(messages, codec, steps=None):
    session_events = records(TOPIC, messages, codec)
    trajectories, dead_letters = assembled(session_events, codec)
    return dict(session_events=session_events, trajectories=trajectories, dead_letters=dead_letters, steps=steps,
                served=SERVED)


@pytest.fixture
def clean(codec):
    """Red's session on its adapter at temperature 0.5 (processed logprobs, one the engine did not give), green's on
    the base; the base's trainer trained green's."""
    nan = [-0.5, float("nan")]
    return stack([call("r1", "a", [1, 2], [3, 4], logprobs=nan, temperature=0.5, logprob_space="processed",
                       invalid_logprobs=1),
                  call("r1", "b", [1, 2, 3, 4, 5], [6], temperature=0.5, logprob_space="processed"),
                  call("g1", "c", [7], [8], team="green", adapter=None),
                  end("r1"), dataclasses.replace(end("g1"), team="green")],
                 codec, steps=[{"step": 1, "version": 1, "trajectory_ids": ["g1/0"]}])


def kinds(report):
    return {v.kind for v in report.violations}


def replaced(clean, tid, **changes):
    """`clean` with trajectory `tid` changed."""
    return {**clean, "trajectories": [dataclasses.replace(r, message=dataclasses.replace(r.message, **changes))
                                      if r.message.event_id == tid else r for r in clean["trajectories"]]}


def test_clean_provenance_passes(clean):
    report = audit(**clean)
    assert report.ok, report.violations
    assert report.counts["trajectories verified bit-exact"] == 2
    assert report.counts["calls served by adapter red-lora"] == 2


def test_a_nan_of_another_payload_is_the_same_missing_logprob(clean):
    red = next(r.message for r in clean["trajectories"] if r.message.event_id == "r1/0")
    logprobs = [OTHER_NAN if x != x else x for x in red.logprobs]
    report = audit(**replaced(clean, "r1/0", logprobs=logprobs))
    assert report.ok, report.violations
    again = dataclasses.replace(clean["trajectories"][0], offset=9, message=dataclasses.replace(red, logprobs=logprobs))
    report = audit(**{**clean, "trajectories": clean["trajectories"] + [again]})
    assert report.ok and report.counts["trajectories re-published (same id and contents)"] == 1


@pytest.mark.parametrize("change", [{"adapter": None}, {"adapter": "blue-lora"}, {"temperatures": []},
                                    {"temperatures": [1.0, 1.0, 0.5, 0.5, 1.0, 1.0]}, {"masked_tokens": 0}])
def test_a_trajectory_that_misnames_its_provenance_is_caught(clean, change):
    assert kinds(audit(**replaced(clean, "r1/0", **change))) == {"trajectory differs"}


def test_a_leaf_two_adapters_generated_must_be_dead_lettered_not_published(codec):
    mixed = stack([call("r1", "a", [1, 2], [3]), call("r1", "b", [1, 2, 3, 4], [5], adapter=None), end("r1")],
                  codec, steps=[])
    assert mixed["trajectories"] == [] and len(mixed["dead_letters"]) == 1
    report = audit(**{**mixed, "served": None})  # the calls' adapters are not judged here: the leaf is
    assert report.ok, report.violations
    assert report.counts["leaves of mixed adapters dead-lettered"] == 1
    assert kinds(audit(**{**mixed, "served": None, "dead_letters": []})) == {"trajectory missing"}
    # what an assembler that picked the first call's adapter would publish
    picked, _ = assembled(records(TOPIC, [call("r1", "a", [1, 2], [3]), call("r1", "b", [1, 2, 3, 4], [5]),
                                          end("r1")], codec), codec)
    report = audit(**{**mixed, "served": None, "trajectories": picked})
    assert "trajectory of mixed adapters published" in kinds(report)


def test_a_base_trainer_that_trained_an_adapters_trajectory_is_caught(clean):
    steps = [{"step": 1, "version": 1, "trajectory_ids": ["g1/0", "r1/0"]}]
    assert kinds(audit(**{**clean, "steps": steps})) == {"trained another policy's samples"}


def test_a_call_recorded_under_an_adapter_its_team_is_not_given_is_caught_in_a_base_stack(clean, codec):
    events = [dataclasses.replace(r, message=dataclasses.replace(r.message, adapter="red-lora"))
              if r.message.session_id == "g1" and hasattr(r.message, "adapter") else r
              for r in clean["session_events"]]
    report = audit(**{**clean, "session_events": events})
    assert "served by the wrong adapter" in kinds(report)


def test_an_adapter_trainer_that_trained_the_bases_samples_of_its_team_is_caught(codec):
    """Red's session sampled by the base (red's adapter was not configured yet when it ran): red's trainer must
    not train it."""
    base_run = stack([call("r1", "a", [1, 2], [3], adapter=None), end("r1")], codec)
    adapters = TeamAdapters(SERVED, {"red": [{"step": 1, "version": 1, "trajectory_ids": ["r1/0"]}]},
                            {"red": "trainer-0-red"})
    report = audit(**{**base_run, "adapters": adapters})
    assert kinds(report) == {"served by the wrong adapter", "trained another policy's samples"}

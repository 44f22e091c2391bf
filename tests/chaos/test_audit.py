"""The audit passes a clean record set and names each kind of violation injected into it.

The clean set is made the way the system makes it: session events as the proxy writes them, trajectories
from the assembler's own code (`replay.check.rebuild`, the SessionBook and core the service runs).
"""

import dataclasses
import json

import pytest

from seamlessflow.assembler import AssemblerOptions
from seamlessflow.chaos.audit import AckedCall, Ledger, Zombie, audit
from seamlessflow.core.control import CommandKind
from seamlessflow.kafka.fencing import WRITER_HEADER
from seamlessflow.kafka.io import Record
from seamlessflow.messages import ControlCommand, DeadLetter, EpisodeEnd, WeightVersion
from seamlessflow.replay.check import rebuild
from seamlessflow.replay.select import SessionEvents
from seamlessflow.rewards.request import REQUEST_KEY, scored, unscorable
from seamlessflow.testing.chaos_records import end, token_io

TOPIC = "t.session-events"


def records(topic, messages, codec):
    return [Record(topic, 0, i, None, codec.encode(m, topic), i, m) for i, m in enumerate(messages)]


@pytest.fixture
def clean(codec):
    events = [token_io("s1", "a", [1, 2], [3, 4]), token_io("s1", "b", [1, 2, 3, 4, 5], [6]),
              token_io("s1", "c", [1, 2, 9], [7, 8]),  # a fork
              token_io("s2", "d", [4], [5, 6]), end("s1"), end("s2", 0.0)]
    session_events = records(TOPIC, events, codec)
    by_session: dict[str, SessionEvents] = {}
    for record in session_events:
        by_session.setdefault(record.message.session_id, SessionEvents(record.message.session_id)).records.append(
            record
        )
    trajectories = records("t.trajectories", rebuild(list(by_session.values()), AssemblerOptions(), codec), codec)
    steps = [
        {"step": 1, "version": 1, "trajectory_ids": ["s1/0", "s1/1"]},
        {"step": 2, "version": 2, "trajectory_ids": ["s2/0"]},
    ]
    weights = records("t.weights", [WeightVersion(f"v{v}", v, "file:///w", v, "hf", "trainer-0", "red", "r", 0)
                                    for v in (1, 2, 2)], codec)
    ledger = Ledger(tuple(AckedCall(m.session_id, tuple(m.prompt_ids), (tuple(m.completion_ids),)) for m in events[:4]),
                    ("s1", "s2"))
    return dict(session_events=session_events, trajectories=trajectories, steps=steps, weights=weights, ledger=ledger)


def test_clean_records_pass(clean):
    report = audit(**clean)
    assert report.ok, report.violations
    assert report.counts["trajectories verified bit-exact"] == 3
    assert report.counts["weight versions re-published after a restart"] == 1


def kinds(report):
    return {v.kind for v in report.violations}


def test_a_changed_token_or_logprob_is_caught(clean, codec):
    first = clean["trajectories"][0]
    for change in ({"tokens": [1, 2, 3, 4, 5, 7]}, {"logprobs": [0.0, 0.0, -0.5, -0.625, 0.0, -0.5000001]}):
        bad = dataclasses.replace(first.message, **change)
        clean_copy = {
            **clean,
            "trajectories": [Record(first.topic, 0, 0, None, None, 0, bad), *clean["trajectories"][1:]],
        }
        assert kinds(audit(**clean_copy)) == {"trajectory differs"}


def test_a_duplicated_trajectory_with_other_contents_and_an_invented_one_are_caught(clean):
    t = clean["trajectories"][0]
    same = Record(t.topic, 0, 10, None, None, 0, t.message)
    other = Record(t.topic, 0, 11, None, None, 0, dataclasses.replace(t.message, reward=0.5))
    invented = Record(t.topic, 0, 12, None, None, 0, dataclasses.replace(t.message, event_id="s1/7", branch_id=7))
    report = audit(**{**clean, "trajectories": clean["trajectories"] + [same]})
    assert report.ok and report.counts["trajectories re-published (same id and contents)"] == 1
    report = audit(**{**clean, "trajectories": clean["trajectories"] + [other, invented]})
    assert kinds(report) == {"duplicate trajectory differs", "unexpected trajectory"}


def test_a_missing_event_an_unpublished_leaf_and_a_lost_end_are_caught(clean):
    without_call_b = [r for r in clean["session_events"] if r.message.event_id != "b.0"]
    report = audit(**{**clean, "session_events": without_call_b})
    assert {"acknowledged call lost", "trajectory differs"} <= kinds(report)  # leaf 0 now ends at call a
    report = audit(**{**clean, "trajectories": clean["trajectories"][1:]})
    assert kinds(report) == {"trajectory missing", "trained unknown"}
    without_end = [
        r for r in clean["session_events"] if not isinstance(r.message, EpisodeEnd) or r.message.session_id != "s2"
    ]
    report = audit(**{**clean, "session_events": without_end, "trajectories": clean["trajectories"][:2],
                      "steps": clean["steps"][:1]})
    assert kinds(report) == {"acknowledged end lost"}


def test_training_twice_and_versions_going_back_are_caught(clean, codec):
    twice = clean["steps"] + [{"step": 3, "version": 3, "trajectory_ids": ["s2/0"]}]
    assert kinds(audit(**{**clean, "steps": twice})) == {"trained twice"}
    back = clean["weights"] + records(
        "t.weights", [WeightVersion("v1b", 1, "file:///w", 9, "hf", "trainer-0", "red", "r", 0)], codec
    )
    assert kinds(audit(**{**clean, "weights": back})) == {"version went back"}


def test_poison_must_be_dead_lettered(clean, codec):
    poison = Record(TOPIC, 0, 99, None, b"\x00garbage", 0, None, "undecodable: bad magic")
    events = clean["session_events"] + [poison]
    assert kinds(audit(**{**clean, "session_events": events})) == {"poison kept"}
    letter = DeadLetter("assembler:t.session-events/0/99", TOPIC, 0, 99, None, b"\x00garbage", "undecodable: bad magic",
                        "assembler", "red", "r", 0)
    report = audit(**{**clean, "session_events": events, "dead_letters": records("t.dead-letter", [letter], codec)})
    assert report.ok and report.dead_letters[("assembler", "undecodable")] == 1


def test_a_session_scored_by_a_reward_worker_takes_the_verifiers_reward_once_answered(codec):
    """The session asked a reward worker (its end carries a reward request, reward 0): the trajectory must
    come back with the request answered; its reward is the verifier's; another worker scoring the same
    record again must agree on everything but who scored it, how often and how long."""
    request = json.dumps({REQUEST_KEY: {"verifier": "arithmetic", "submission": "7", "prompt": "", "payload": {}}})
    events = [token_io("s3", "e", [1, 2], [3, 4]), dataclasses.replace(end("s3", 0.0), info_json=request)]
    session_events = records(TOPIC, events, codec)
    [pending] = rebuild([SessionEvents("s3", session_events)], AssemblerOptions(), codec)
    first = scored(pending, 1.0, {"worker": "reward-a", "attempts": 1, "elapsed_s": 0.01})
    again = scored(pending, 1.0, {"worker": "reward-b", "attempts": 2, "elapsed_s": 0.5})
    differs = scored(pending, 0.0, {"worker": "reward-b", "attempts": 1, "elapsed_s": 0.01})
    given_up = unscorable(pending, "verifier raised", {"worker": "reward-a", "attempts": 2, "elapsed_s": 0.02})

    def check(*published):
        return audit(session_events, records("t.trajectories", list(published), codec))

    assert check(first).ok and check(given_up).ok
    report = check(first, again)
    assert report.ok and report.counts["trajectories scored again (same reward and contents)"] == 1
    assert kinds(check(first, differs)) == {"duplicate trajectory differs"}
    [unanswered] = check(pending).violations
    assert unanswered.kind == "trajectory differs" and "reward request unanswered" in unanswered.detail
    assert kinds(check(dataclasses.replace(first, tokens=[1, 2, 3, 5]))) == {"trajectory differs"}


def test_a_zombie_that_wrote_after_its_replacement_began_is_caught(clean, codec):
    """A trainer frozen at 1000 ms, replaced at 1500, woken at 9000: its version at 900 (before) is fine;
    one at 9100 (after it woke, so after its replacement began) is a violation, as is a command; the
    replacement's own records and the committed offsets moving on are not."""
    zombie = Zombie("trainer", ("h:41", "h:42"), replaced_ms=1500, resumed_ms=9000, exited=True, exit_code=3,
                    offsets_at_resume={0: 4}, offsets_after={0: 6})

    def by(writer, at_ms, message, topic="t.weights", offset=0):
        return Record(topic, 0, offset, None, None, at_ms, message, headers={WRITER_HEADER: writer.encode()})

    version = clean["weights"][-1].message  # v2
    before = [by("h:41", 900, version), by("h:50", 2000, dataclasses.replace(version, version=3), offset=1)]
    ledger = dataclasses.replace(clean["ledger"], zombies=(zombie,))
    report = audit(**{**clean, "weights": clean["weights"] + before, "ledger": ledger})
    assert report.ok, report.violations
    assert report.counts["records by zombies before their replacement"] == 1

    late = by("h:42", 9100, dataclasses.replace(version, version=4), offset=2)
    command = by("h:41", 9050, ControlCommand("c1", "r0", 1, CommandKind.LOAD_WEIGHTS, "red", "r", 9050), "t.control")
    report = audit(**{**clean, "weights": clean["weights"] + before + [late], "ledger": ledger,
                      "role_records": [command]})
    assert kinds(report) == {"zombie wrote"} and len(report.violations) == 2


def test_a_zombie_not_replaced_not_gone_or_moving_offsets_back_is_caught(clean):
    base = Zombie("trainer", ("h:41",), replaced_ms=1500, resumed_ms=9000, exited=True, exit_code=3)
    for change, kind in (({"took_over": False}, "zombie not replaced"), ({"exited": False}, "zombie lived on"),
                         ({"offsets_at_resume": {0: 6}, "offsets_after": {0: 4}}, "committed offsets went back")):
        ledger = dataclasses.replace(clean["ledger"], zombies=(dataclasses.replace(base, **change),))
        assert kinds(audit(**{**clean, "ledger": ledger})) == {kind}
    ledger = dataclasses.replace(clean["ledger"], zombies=(dataclasses.replace(base, exit_code=1),))
    report = audit(**{**clean, "ledger": ledger})  # gone, though not by the fencing: counted
    assert report.ok and report.counts["zombies exited with 1 (not fenced)"] == 1

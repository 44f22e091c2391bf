"""The audit as the chaos run calls it: records read back from real topics, the step log and the ledger
from disk; violations injected into the topics are found."""

import dataclasses
import json

from seamlessflow.assembler import AssemblerOptions
from seamlessflow.chaos.audit import Ledger, Zombie
from seamlessflow.chaos.collect import audit_topics, before_the_cut, read_ledger, zombie_line
from seamlessflow.kafka.io import MessageProducer, read_topic
from seamlessflow.kafka.reader import Record
from seamlessflow.messages import Trajectory
from seamlessflow.replay.check import rebuild
from seamlessflow.replay.select import SessionEvents
from seamlessflow.testing.chaos_records import end, token_io
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions


def test_audit_of_real_topics_passes_then_names_injected_violations(settings, codec, tmp_path):
    topics = Topics(settings)
    producer = MessageProducer(settings, codec)
    for message in [token_io("s1", "a", [1, 2], [3]), token_io("s1", "b", [1, 2, 3, 4], [5]), end("s1")]:
        producer.send(topics.session_events, message.session_id, message)
    producer.flush()
    sessions = [SessionEvents("s1", list(read_topic(settings, topics.session_events, codec)))]
    [trajectory] = rebuild(sessions, AssemblerOptions(), codec)
    producer.send_and_wait(topics.trajectories, trajectory.group_id, trajectory)
    work = TrainerOptions.from_settings(settings).work_dir(settings)
    work.mkdir(parents=True)
    (work / "steps.jsonl").write_text(json.dumps({"step": 1, "version": 1, "trajectory_ids": ["s1/0"]}) + "\n")
    ledger_file = tmp_path / "ledger.jsonl"
    ledger_file.write_text('{"session": "s1", "prompt": [1, 2], "completions": [[3]]}\n'
                           '{"session": "s1", "prompt": [1, 2, 3, 4], "completions": [[5]]}\n{"end": "s1"}\n')

    report = audit_topics(settings, read_ledger(ledger_file))
    assert report.ok, report.violations
    assert report.counts["trajectories verified bit-exact"] == 1 and report.counts["trajectories trained"] == 1

    producer.send_and_wait(topics.trajectories, "g1", dataclasses.replace(trajectory, tokens=[1, 2, 3, 4, 6]))
    with ledger_file.open("a") as out:
        out.write('{"session": "s1", "prompt": [1, 2], "completions": [[3], [4]]}\n')  # a second choice never recorded
    (work / "steps.jsonl").write_text((work / "steps.jsonl").read_text()
                                      + json.dumps({"step": 2, "version": 2, "trajectory_ids": ["s1/0"]}) + "\n")
    report = audit_topics(settings, read_ledger(ledger_file))
    assert {v.kind for v in report.violations} == {
        "duplicate trajectory differs",
        "acknowledged call lost",
        "trained twice",
    }


def test_a_trajectory_written_after_the_cut_of_a_session_ended_after_it_waits_for_the_next_audit():
    sample = next(s for s in SAMPLES if isinstance(s, Trajectory))
    events = [Record("e", 0, 0, None, None, 900, end("s1"))]

    def written(session: str, at_ms: int) -> Record:
        return Record("t", 0, 0, None, None, at_ms, dataclasses.replace(sample, session_id=session))

    kept = before_the_cut([written("s1", 1500), written("s2", 999), written("s3", 1000)], events, cut_ms=1000)
    # s1 ended among the events read: judged; s2 written before the cut: judged (its end is missing: a
    # violation the audit names); s3 written after the cut, its end not read yet: left out
    assert [r.message.session_id for r in kept] == ["s1", "s2"]


def test_a_zombie_noted_in_the_ledger_reads_back_as_it_was(tmp_path):
    zombie = Zombie("trainer", ("h:1", "h:2"), 1500, 9000, True, True, 3, {0: 4}, {0: 6})
    path = tmp_path / "ledger.jsonl"
    path.write_text('{"end": "s1"}\n' + zombie_line(zombie))
    assert read_ledger(path) == Ledger((), ("s1",), (zombie,))

import dataclasses

from seamlessflow.kafka.io import Record
from seamlessflow.replay.archive import archive_file, read_archive, write_archive
from seamlessflow.testing.replay_samples import expected_two_turn, forked_session, records, two_turn_session


def test_round_trip_is_lossless(tmp_path, codec):
    originals = records(two_turn_session() + forked_session(), codec, topic="p.session-events")
    originals.append(Record("p.session-events", 1, 9, None, b"\x00garbage", 77, None, "corrupt"))
    path = write_archive(tmp_path, "p.session-events", originals)
    back = list(read_archive(path, codec))
    assert [(r.topic, r.partition, r.offset, r.key, r.timestamp_ms, r.value) for r in back] == \
        [(r.topic, r.partition, r.offset, r.key, r.timestamp_ms, r.value) for r in originals]
    assert [r.message for r in back] == [r.message for r in originals]
    assert back[-1].message is None and back[-1].error


def test_float32_logprobs_and_every_message_field_survive(tmp_path, codec):
    trajectory = expected_two_turn()
    trajectory.logprobs[2] = -0.1  # not exact in float32: the codec rounds it, the archive must keep that
    (original,) = records([trajectory], codec, topic="p.trajectories")
    original.message = codec.decode(original.value)
    (back,) = read_archive(write_archive(tmp_path, "p.trajectories", [original]), codec)
    assert back.message == original.message and back.value == original.value


def test_archive_found_by_short_name_under_another_prefix(tmp_path, codec):
    write_archive(tmp_path, "old.trajectories", [])
    assert archive_file(tmp_path, "new.trajectories", "trajectories").name == "old.trajectories.avro"


def test_archives_written_before_packing_read_the_same(tmp_path, codec, monkeypatch):
    """An archive whose message union holds the array-only schemas (as written before packing) reads back."""
    import fastavro

    from seamlessflow.avro.schema import previous_schemas
    from seamlessflow.replay import archive

    old: dict[str, dict] = {}
    for s in previous_schemas():  # the earliest version of each: the array-only one
        old.setdefault(s["name"], s)
    schema = archive.archive_schema()
    union = schema["fields"][5]["type"]
    schema["fields"][5]["type"] = [old.get(t["name"], t) if isinstance(t, dict) else t for t in union]
    monkeypatch.setattr(archive, "_PARSED", fastavro.parse_schema(schema))
    monkeypatch.setattr(archive, "to_wire", lambda message: dict(vars(message)))  # arrays, no packed fields
    before_turns = dataclasses.replace(expected_two_turn(), turn_ends=[], turn_rewards=[])  # fields added later
    originals = records(two_turn_session() + [before_turns], codec, topic="p.session-events")
    path = write_archive(tmp_path, "p.session-events", originals)
    monkeypatch.undo()
    back = list(read_archive(path, codec))
    assert [r.message for r in back] == [r.message for r in originals] and len(back) == len(originals)

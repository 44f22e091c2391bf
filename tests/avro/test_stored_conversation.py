"""StoredConversation, a message added to the contract: it round-trips, and the one schema it changes, the replay
archive's union of every message, evolves compatibly both ways (an archive written before it reads with the
new union; one written with the new union reads with the old, where it holds no StoredConversation)."""

import io

import fastavro

from seamlessflow.avro import Codec, LocalRegistry
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.messages import MESSAGE_TYPES, StoredConversation
from seamlessflow.replay.archive import archive_schema

ENTRY = {"topic": "p.session-events", "partition": 0, "offset": 3, "timestamp_ms": 9, "key": b"s1", "raw": None,
         "message": ("seamlessflow.EpisodeEnd", {"event_id": "s1.end", "session_id": "s1", "team": "t", "run": "r",
                                                 "reward": 1.0, "status": "done", "info_json": "{}", "num_calls": 1,
                                                 "created_at_ms": 5, "group_id": None, "task_id": None,
                                                 "call_rewards": {}})}
STORED = StoredConversation("conv_1", "conv_1", "team", "run", None, '{"k": "v"}',
                            '[{"type": "message", "id": "msg_1"}]', 123)


def _old_archive_schema() -> dict:
    schema = archive_schema()
    union = next(f for f in schema["fields"] if f["name"] == "message")
    union["type"] = ["null", *[avro_schema_of(cls) for cls in MESSAGE_TYPES if cls is not StoredConversation]]
    return schema


def _write(schema: dict) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [ENTRY])
    return out.getvalue()


def test_a_stored_conversation_round_trips_with_a_session_and_without():
    codec = Codec(LocalRegistry([]))
    assert codec.decode(codec.encode(STORED, "t")) == STORED
    in_session = StoredConversation(**{**STORED.__dict__, "session_id": "s1"})
    assert codec.decode(codec.encode(in_session, "t")) == in_session


def test_an_archive_written_before_the_message_reads_with_the_new_union():
    [entry] = fastavro.reader(io.BytesIO(_write(_old_archive_schema())), reader_schema=archive_schema(),
                              return_record_name=True)
    assert entry["message"][0] == "seamlessflow.EpisodeEnd" and entry["message"][1]["session_id"] == "s1"


def test_an_old_reader_reads_an_archive_written_with_the_new_union():
    [entry] = fastavro.reader(io.BytesIO(_write(archive_schema())), reader_schema=_old_archive_schema(),
                              return_record_name=True)
    assert entry["message"][0] == "seamlessflow.EpisodeEnd" and entry["message"][1]["reward"] == 1.0

"""StoredResponse and StoredConversation, messages added to the contract: each round-trips, and the one schema
each changes, the replay archive's union of every message, evolves compatibly both ways (an archive written
before it reads with the new union; one written with the new union reads with the old, where it holds none)."""

import io

import fastavro
import pytest

from seamlessflow.avro import Codec, LocalRegistry
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.messages import MESSAGE_TYPES, StoredConversation, StoredResponse
from seamlessflow.replay.archive import archive_schema

RESPONSE = StoredResponse("resp_1", "resp_1", "s1", "team", "run", None, '[{"type": "message"}]', '{"id": "resp_1"}',
                          '[{"role": "user", "content": "hi"}]', [1, 2, 3], [4, 5], [7, 7], 123)
CONVERSATION = StoredConversation("conv_1", "conv_1", "team", "run", None, '{"k": "v"}',
                                  '[{"type": "message", "id": "msg_1"}]', 123)
ENTRY = {"topic": "p.session-events", "partition": 0, "offset": 3, "timestamp_ms": 9, "key": b"s1", "raw": None,
         "message": ("seamlessflow.EpisodeEnd", {"event_id": "s1.end", "session_id": "s1", "team": "t", "run": "r",
                                                 "reward": 1.0, "status": "done", "info_json": "{}", "num_calls": 1,
                                                 "created_at_ms": 5, "group_id": None, "task_id": None,
                                                 "call_rewards": {}})}
ADDED = pytest.mark.parametrize("added", [StoredResponse, StoredConversation], ids=lambda cls: cls.__name__)


def _archive_schema_without(added: type) -> dict:
    schema = archive_schema()
    union = next(f for f in schema["fields"] if f["name"] == "message")
    union["type"] = ["null", *[avro_schema_of(cls) for cls in MESSAGE_TYPES if cls is not added]]
    return schema


def _write(schema: dict) -> bytes:
    out = io.BytesIO()
    fastavro.writer(out, fastavro.parse_schema(schema), [ENTRY])
    return out.getvalue()


@pytest.mark.parametrize("message", [
    RESPONSE, StoredResponse(**{**RESPONSE.__dict__, "previous_response_id": "resp_0"}),
    CONVERSATION, StoredConversation(**{**CONVERSATION.__dict__, "session_id": "s1"}),
])
def test_a_stored_record_round_trips(message):
    codec = Codec(LocalRegistry([]))
    assert codec.decode(codec.encode(message, "t")) == message


@ADDED
def test_an_archive_written_before_the_message_reads_with_the_new_union(added):
    [entry] = fastavro.reader(io.BytesIO(_write(_archive_schema_without(added))), reader_schema=archive_schema(),
                              return_record_name=True)
    assert entry["message"][0] == "seamlessflow.EpisodeEnd" and entry["message"][1]["session_id"] == "s1"


@ADDED
def test_an_old_reader_reads_an_archive_written_with_the_new_union(added):
    [entry] = fastavro.reader(io.BytesIO(_write(archive_schema())), reader_schema=_archive_schema_without(added),
                              return_record_name=True)
    assert entry["message"][0] == "seamlessflow.EpisodeEnd" and entry["message"][1]["reward"] == 1.0

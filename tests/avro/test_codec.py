import dataclasses
import struct

import pytest

from seamlessflow.avro import Codec, CodecError, LocalRegistry, RecordTooLarge
from seamlessflow.avro.registry import local_schema_id
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.messages import CommandAck, EpisodeEnd, ResourceStatus
from seamlessflow.testing.samples import SAMPLES


@pytest.mark.parametrize("message", SAMPLES, ids=lambda m: type(m).__name__)
def test_round_trip_every_message(codec, message):
    data = codec.encode(message, "x.topic")
    assert data[0] == 0  # Confluent magic byte
    assert codec.decode(data) == message


def test_float32_logprobs_round_trip_exactly_after_the_first_rounding(codec):
    msg = SAMPLES[0]
    once = codec.decode(codec.encode(dataclasses.replace(msg, logprobs=[-0.1234567891]), "t"))
    twice = codec.decode(codec.encode(once, "t"))
    assert once.logprobs == twice.logprobs


def test_ids_are_deterministic_across_codecs():
    a, b = Codec(), Codec()
    assert a.encode(SAMPLES[1], "t")[:5] == b.encode(SAMPLES[1], "t")[:5]
    assert b.decode(a.encode(SAMPLES[1], "t")) == SAMPLES[1]


@pytest.mark.parametrize(
    "data, reason",
    [
        (b"", "shorter"),
        (b"\x01\x00\x00\x00\x01abc", "magic"),
        (b"\x00\x00\x00\x00\x07abc", "not in the local registry"),
    ],
)
def test_bad_records_raise_a_clear_error(codec, data, reason):
    with pytest.raises(CodecError, match=reason):
        codec.decode(data)


def test_corrupt_body_raises_codec_error(codec):
    data = codec.encode(SAMPLES[0], "t")
    with pytest.raises(CodecError, match="corrupt TokenIO"):
        codec.decode(data[:12])


def test_oversize_record_is_rejected_with_its_size():
    codec = Codec(max_record_bytes=10_000)
    big = dataclasses.replace(SAMPLES[0], prompt_ids=list(range(5000)))
    with pytest.raises(RecordTooLarge, match="over the 10000-byte limit"):
        codec.encode(big, "t")


def _v2_schema_with_new_field():
    schema = avro_schema_of(EpisodeEnd)
    schema["fields"].append({"name": "env_seconds", "type": "double", "default": 0.0})
    return schema


def test_backward_compatible_evolution_reads_both_ways():
    """v2 adds a field with a default: v2 readers read v1 records, and v1 readers read v2 records."""
    import io

    import fastavro

    v1, v2 = avro_schema_of(EpisodeEnd), _v2_schema_with_new_field()
    registry = LocalRegistry([v1, v2])
    codec_v1 = Codec(registry)
    record_v1 = codec_v1.encode(SAMPLES[1], "t")
    # a v2 reader reads a v1 record: the new field takes its default
    writer = fastavro.parse_schema(registry.schema_for(struct.unpack(">I", record_v1[1:5])[0]))
    as_v2 = fastavro.schemaless_reader(io.BytesIO(record_v1[5:]), writer, fastavro.parse_schema(v2))
    assert as_v2["env_seconds"] == 0.0 and as_v2["reward"] == 0.75
    # a v1 reader (this code) reads a record written by a v2 writer: the extra field is skipped
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(v2), {**dataclasses.asdict(SAMPLES[1]), "env_seconds": 3.5})
    record_v2 = struct.pack(">bI", 0, registry.add(v2)) + body.getvalue()
    assert codec_v1.decode(record_v2) == SAMPLES[1]


def test_resource_status_hardware_tags_evolve_both_ways():
    """The status record gained `hardware_tags` (default []): old heartbeats read as untagged, and a reader
    that predates the field reads new heartbeats without it."""
    import io

    import fastavro

    v2 = avro_schema_of(ResourceStatus)
    v1 = {**v2, "fields": [f for f in v2["fields"] if f["name"] != "hardware_tags"]}
    registry = LocalRegistry([v1, v2])
    codec = Codec(registry)
    tagged = next(m for m in SAMPLES if isinstance(m, ResourceStatus))
    assert tagged.hardware_tags  # the sample carries tags, so the default below is not what it had
    old = {k: v for k, v in dataclasses.asdict(tagged).items() if k != "hardware_tags"}
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(v1), old)
    record_v1 = struct.pack(">bI", 0, registry.add(v1)) + body.getvalue()
    assert codec.decode(record_v1) == dataclasses.replace(tagged, hardware_tags=[])
    record_v2 = codec.encode(tagged, "t")
    writer = fastavro.parse_schema(registry.schema_for(struct.unpack(">I", record_v2[1:5])[0]))
    as_v1 = fastavro.schemaless_reader(io.BytesIO(record_v2[5:]), writer, fastavro.parse_schema(v1))
    assert as_v1 == old


def test_confluent_schema_registry_client_path():
    """Ids registered through confluent-kafka's registry client (its in-process mock) decode anywhere."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from seamlessflow.kafka.schema_registry import ConfluentRegistry

    server = SchemaRegistryClient.new_client({"url": "mock://sf-test"})
    writer, reader = Codec(ConfluentRegistry(client=server)), Codec(ConfluentRegistry(client=server))
    data = writer.encode(SAMPLES[0], "x.session-events")
    assert reader.decode(data) == SAMPLES[0]


def test_an_id_unknown_to_the_schema_registry_is_a_codec_error_not_a_crash():
    """A consumer dead-letters a CodecError; the registry's own 404 error would have stopped it."""
    from confluent_kafka.schema_registry import SchemaRegistryClient

    from seamlessflow.kafka.schema_registry import ConfluentRegistry

    codec = Codec(ConfluentRegistry(client=SchemaRegistryClient.new_client({"url": "mock://sf-unknown"})))
    framed = b"\x00" + (987654).to_bytes(4, "big") + b"\x02"
    with pytest.raises(CodecError, match="987654 is not in the schema registry"):
        codec.decode(framed)


def test_enumerated_fields_are_strings_on_the_wire_and_enums_when_read(codec):
    """The docs listing the symbols changed no schema id (records written before still read), and a record
    holding a symbol outside the enum is a bad record, not a message."""
    import io

    import fastavro

    status = next(m for m in SAMPLES if isinstance(m, ResourceStatus))
    decoded = codec.decode(codec.encode(status, "t"))
    assert (decoded.kind, decoded.state) == (ResourceKind.ROLLOUT, ResourceState.ACTIVE)
    assert type(decoded.kind) is ResourceKind and type(decoded.state) is ResourceState
    schema = avro_schema_of(ResourceStatus)
    without_docs = {**schema, "fields": [{k: v for k, v in f.items() if k != "doc"} for f in schema["fields"]]}
    assert without_docs != schema and local_schema_id(without_docs) == local_schema_id(schema)
    body = io.BytesIO()
    fastavro.schemaless_writer(
        body, fastavro.parse_schema(schema), {**dataclasses.asdict(status), "state": "hibernating"}
    )
    with pytest.raises(CodecError, match="'hibernating' is not a valid ResourceState"):
        codec.decode(codec.encode(status, "t")[:5] + body.getvalue())


def test_a_symbol_outside_the_enum_is_not_encoded(codec):
    ack = dataclasses.replace(next(m for m in SAMPLES if isinstance(m, CommandAck)))
    ack.outcome = "maybe"  # type: ignore[assignment]  (set after construction, past the dataclass check)
    with pytest.raises(CodecError, match="'maybe' is not a valid Outcome"):
        codec.encode(ack, "t")

"""Packed token arrays: old (array) records still decode, new records read both ways, float32 stays bit-exact."""

import dataclasses
import io
import random
import struct

import fastavro
import pytest

from seamlessflow.avro import Codec, CodecError, LocalRegistry
from seamlessflow.avro.packing import packed_fields
from seamlessflow.avro.schema import avro_schema_of
from seamlessflow.messages import TokenIO, Trajectory
from seamlessflow.testing.samples import SAMPLES, encode_before_packing, previous_schema

TOKEN_IO, _, TRAJECTORY = SAMPLES[:3]
V1 = {cls.__name__: previous_schema(cls, 1) for cls in (TokenIO, Trajectory)}  # before packing


@pytest.mark.parametrize("message", [TOKEN_IO, TRAJECTORY], ids=lambda m: type(m).__name__)
def test_records_written_before_packing_decode_to_the_same_message(codec, message):
    assert codec.decode(encode_before_packing(message)) == message


@pytest.mark.parametrize("message", [TOKEN_IO, TRAJECTORY], ids=lambda m: type(m).__name__)
def test_a_reader_of_the_old_schema_reads_new_records_without_error_but_sees_empty_arrays(codec, message):
    """Why consumers are upgraded before producers: an old reader skips the packed bytes it does not know."""
    data = codec.encode(message, "t")
    writer = fastavro.parse_schema(avro_schema_of(type(message)))
    old_view = fastavro.schemaless_reader(
        io.BytesIO(data[5:]), writer, fastavro.parse_schema(V1[type(message).__name__])
    )
    known = [f.name for f in packed_fields(type(message)) if f.name in old_view]  # arrays added later: unseen
    assert known and {name: old_view[name] for name in known} == {name: [] for name in known}
    assert old_view["event_id"] == message.event_id


@pytest.mark.parametrize("message", [TOKEN_IO, TRAJECTORY], ids=lambda m: type(m).__name__)
def test_packed_and_array_forms_decode_to_equal_messages(message):
    packed, arrays = Codec(), Codec(packed=False)
    assert packed.decode(arrays.encode(message, "t")) == arrays.decode(packed.encode(message, "t")) == message


def test_packed_records_carry_no_array_items(codec):
    big = dataclasses.replace(TOKEN_IO, prompt_ids=list(range(40_000, 41_000)))
    packed, arrays = codec.encode(big, "t"), Codec(packed=False).encode(big, "t")
    assert (41_000).to_bytes(4, "little") not in packed  # sanity of the probe below
    assert (40_999).to_bytes(4, "little") in packed and (40_999).to_bytes(4, "little") not in arrays
    assert len(packed) < len(arrays) + 1000 * 4  # ~4 bytes per id, never the array and the bytes both


def test_float32_logprobs_are_bit_exact_with_the_array_form():
    """Packed float32 holds the same bits the Avro float array held (one rounding from the engine's double)."""
    rng = random.Random(7)
    values = [-rng.expovariate(0.5) for _ in range(2000)] + [-9999.0, -0.1, -1e-40, -0.0, 0.0, -3.4e38]
    message = dataclasses.replace(TOKEN_IO, completion_ids=list(range(len(values))), logprobs=values,
                                  versions=[0] * len(values))
    via_arrays = Codec(packed=False).decode(Codec(packed=False).encode(message, "t")).logprobs
    via_packed = Codec().decode(Codec().encode(message, "t")).logprobs

    def bits(xs):
        return [struct.pack("<d", x) for x in xs]

    assert (
        bits(via_packed)
        == bits(via_arrays)
        == bits(struct.unpack(f"<{len(values)}f", struct.pack(f"<{len(values)}f", *values)))
    )


def test_mask_travels_as_one_byte_per_token(codec):
    assert dict((f.name, f.dtype.itemsize) for f in packed_fields(Trajectory))["loss_mask"] == 1
    assert codec.decode(codec.encode(TRAJECTORY, "t")).loss_mask == TRAJECTORY.loss_mask


def _packed_body(message, **overrides):
    schema = avro_schema_of(type(message))
    record = {**dataclasses.asdict(message), **{f.name + "_packed": None for f in packed_fields(type(message))}}
    record.update(overrides)
    body = io.BytesIO()
    fastavro.schemaless_writer(body, fastavro.parse_schema(schema), record)
    return struct.pack(">bI", 0, LocalRegistry().add(schema)) + body.getvalue()


def test_poison_packed_records_raise_codec_errors(codec):
    ragged = _packed_body(TOKEN_IO, prompt_ids=[], prompt_ids_packed=b"\x01\x02\x03")
    with pytest.raises(CodecError, match="corrupt TokenIO"):
        codec.decode(ragged)
    both = _packed_body(TOKEN_IO, prompt_ids_packed=b"\x01\x00\x00\x00")
    with pytest.raises(CodecError, match="both an array and packed bytes"):
        codec.decode(both)


def test_ids_outside_int32_are_refused_not_wrapped(codec):
    with pytest.raises(CodecError, match="cannot encode TokenIO"):
        codec.encode(dataclasses.replace(TOKEN_IO, prompt_ids=[1, 2**31]), "t")


def test_token_io_decodes_to_plain_lists(codec):
    back = codec.decode(codec.encode(TOKEN_IO, "t"))
    assert all(type(getattr(back, f.name)) is list for f in packed_fields(TokenIO))
    assert type(back.prompt_ids[0]) is int and type(back.logprobs[0]) is float


def test_settings_choose_the_wire_form_and_default_to_packed():
    from seamlessflow.config import Settings
    from seamlessflow.kafka.codecs import codec_for

    def wire_prompt(codec):
        data = codec.encode(TOKEN_IO, "t")
        writer = fastavro.parse_schema(avro_schema_of(TokenIO))
        record = fastavro.schemaless_reader(io.BytesIO(data[5:]), writer, None)
        return record["prompt_ids"], record["prompt_ids_packed"]

    assert wire_prompt(codec_for(Settings())) == ([], b"\x01\x00\x00\x00\x02\x00\x00\x00\x03\x00\x00\x00")
    assert wire_prompt(codec_for(Settings(packed_token_arrays=False))) == ([1, 2, 3], None)

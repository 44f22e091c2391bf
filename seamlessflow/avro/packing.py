"""Per-token arrays packed as little-endian bytes on the wire, plain lists in Python.

Why: fastavro reads an `array<int>` one varint at a time (~0.2 µs per id), and an agent's every call
re-sends its whole prompt, so decoding token ids was the assembler's largest cost. A `bytes` field is read
as one copy; `numpy.frombuffer` views it without per-element decoding, and `.tolist()` turns the view into
the same list of Python ints (or floats) that the array field gave, in C, ~10x cheaper than fastavro.

Wire form of a field declared `Packed*` in `seamlessflow.messages` (say `prompt_ids`):
- `prompt_ids`: the original Avro array, kept (default `[]`) so records written before packing still read;
  new writers leave it empty.
- `prompt_ids_packed`: `["null", "bytes"]`, default null: the values as `<i4` / `<i1` / `<f4`.
A reader takes the packed bytes when present, else the array. Float32 logprobs are bit-exact with the
array form: both store IEEE-754 binary32, rounded once from the engine's double with the same C cast.
Why lists and not numpy arrays in the dataclasses: every consumer (the prefix tree's list slicing and
comparisons, dataclass equality, JSON for `tail`) works on lists unchanged; the conversion is in C.
"""

from __future__ import annotations

import functools
import typing
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

SUFFIX = "_packed"
MARKER = "packed"


@dataclass(frozen=True)
class PackedField:
    name: str
    dtype: np.dtype
    item: str  # Avro item type of the original array field

    @property
    def wire_name(self) -> str:
        return self.name + SUFFIX


def packed_spec(hint: Any) -> tuple[np.dtype, str] | None:
    """(dtype, Avro item type) when a type hint is one of the `Packed*` aliases, else None."""
    if typing.get_origin(hint) is not typing.Annotated:
        return None
    meta = typing.get_args(hint)[1:]
    if len(meta) == 3 and meta[0] == MARKER:
        return np.dtype(meta[1]), meta[2]
    return None


@functools.cache
def field_names(cls: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(cls))


@functools.cache
def packed_fields(cls: type) -> tuple[PackedField, ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    out = []
    for f in fields(cls):
        spec = packed_spec(hints[f.name])
        if spec is not None:
            out.append(PackedField(f.name, *spec))
    return tuple(out)


def pack_values(values: Any, dtype: np.dtype) -> bytes:
    """Little-endian bytes of `values`; raises OverflowError/ValueError/TypeError for values the type cannot hold."""
    if isinstance(values, np.ndarray):
        values = values.tolist()  # same rules as for lists: an out-of-range id fails instead of wrapping
    return np.asarray(values, dtype=dtype).tobytes()


def unpack_values(data: bytes, dtype: np.dtype) -> list:
    """The list `pack_values` was given (floats as their float32 values); ValueError on a ragged length."""
    return np.frombuffer(data, dtype=dtype).tolist()


def to_wire(message: Any, packed: bool = True) -> dict:
    """The Avro record of a message: packed fields as bytes (or, with `packed=False`, as older writers did)."""
    cls: type = type(message)
    record = {name: getattr(message, name) for name in field_names(cls)}
    for f in packed_fields(cls):
        if packed:
            record[f.wire_name] = pack_values(record[f.name], f.dtype)
            record[f.name] = []
        else:
            record[f.wire_name] = None
    return record


def from_wire(cls: type, record: dict) -> Any:
    """The message for a decoded Avro record of either form (raises ValueError if a record holds both)."""
    for f in packed_fields(cls):
        data = record.pop(f.wire_name, None)
        if data is not None:
            if record[f.name]:
                raise ValueError(f"{f.name} is both an array and packed bytes")
            record[f.name] = unpack_values(data, f.dtype)
    return cls(**record)

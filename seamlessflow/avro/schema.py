"""Avro schemas derived from the message dataclasses, and loaded from `schemas/*.avsc`.

The `.avsc` files are the contract other languages and the Schema Registry see; the dataclasses are what
Python code uses. `avro_schema_of` derives one from the other so a test can keep them identical.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import types
import typing
from enum import StrEnum
from pathlib import Path
from typing import Any

from seamlessflow.avro.packing import SUFFIX, packed_spec
from seamlessflow.messages import MESSAGE_TYPES, NAMESPACE, enum_fields

_PLAIN = {str: "string", bool: "boolean", bytes: "bytes", int: "long", float: "double"}


def schemas_dir() -> Path:
    """`schemas/` at the repository root (overridable for installed deployments)."""
    env = os.environ.get("SEAMLESSFLOW_SCHEMAS_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / "schemas"


def _avro_type(hint: Any) -> Any:
    origin = typing.get_origin(hint)
    if origin is typing.Annotated:
        return typing.get_args(hint)[1]
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return ["null", _avro_type(inner[0])]
    if origin is list:
        return {"type": "array", "items": _avro_type(typing.get_args(hint)[0])}
    if origin is dict:
        return {"type": "map", "values": _avro_type(typing.get_args(hint)[1])}
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        return "string"  # enumerated, but a string on the wire (see `seamlessflow.messages`)
    return _PLAIN[hint]


def avro_schema_of(cls: type) -> dict:
    """The Avro record schema a message dataclass stands for.

    A `Packed*` field is two Avro fields: the original array in place (default `[]`, so writers may leave it
    empty) and `<name>_packed` (null or bytes, default null) appended after every declared field, so the
    change is a compatible evolution of the array-only schema (`seamlessflow/avro/packing.py`). An enumerated
    field is a `string` whose `doc` lists its symbols (a doc changes no schema id: ids hash the canonical form).
    """
    hints = typing.get_type_hints(cls, include_extras=True)
    docs = {name: f"One of: {', '.join(enum)} (seamlessflow.core {enum.__name__})" for name, enum in enum_fields(cls)}
    fields, packed = [], []
    for f in dataclasses.fields(cls):
        spec = packed_spec(hints[f.name])
        if spec is not None:
            fields.append({"name": f.name, "type": {"type": "array", "items": spec[1]}, "default": []})
            packed.append({"name": f.name + SUFFIX, "type": ["null", "bytes"], "default": None})
            continue
        entry: dict[str, Any] = {"name": f.name, "type": _avro_type(hints[f.name])}
        if f.name in docs:
            entry["doc"] = docs[f.name]
        if f.default is not dataclasses.MISSING:
            entry["default"] = f.default
        elif f.default_factory is not dataclasses.MISSING:  # e.g. an empty list: Avro's default is `[]`
            entry["default"] = f.default_factory()
        fields.append(entry)
    return {"type": "record", "name": cls.__name__, "namespace": NAMESPACE, "fields": fields + packed}


def schema_file_name(cls: type) -> str:
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", cls.__name__).lower() + ".avsc"


def load_schema_file(cls: type, directory: Path | None = None) -> dict:
    return json.loads(((directory or schemas_dir()) / schema_file_name(cls)).read_text())


def previous_schemas(directory: Path | None = None) -> list[dict]:
    """Earlier versions of the schemas (`schemas/previous/*.avsc`), so records written with them still decode
    where ids come from the schemas themselves (no Schema Registry keeps them)."""
    folder = (directory or schemas_dir()) / "previous"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.avsc"))]


def write_schema_files(directory: Path | None = None) -> list[Path]:
    """Regenerate `schemas/*.avsc` from the dataclasses (used when a message gains a field)."""
    out = []
    for cls in MESSAGE_TYPES:
        path = (directory or schemas_dir()) / schema_file_name(cls)
        path.write_text(json.dumps(avro_schema_of(cls), indent=2) + "\n")
        out.append(path)
    return out

"""Schema ids for the Confluent wire format: a real Schema Registry, or a deterministic local one.

Without a registry every process derives the same id from a schema's canonical form, so any process of the
project decodes any record; old schema versions stay decodable as long as their writer schema is known
(`LocalRegistry.add`). With `schema_registry_url` set, ids come from a Confluent Schema Registry
(`seamlessflow.kafka.schema_registry.ConfluentRegistry`, beside the other Kafka clients, picked by
`seamlessflow.kafka.codecs.codec_for`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Protocol

import fastavro
from fastavro.schema import to_parsing_canonical_form


class Registry(Protocol):
    def id_for(self, schema: dict, subject: str) -> int: ...

    def schema_for(self, schema_id: int) -> dict: ...


def local_schema_id(schema: dict) -> int:
    """A positive 31-bit id from the schema's Parsing Canonical Form."""
    canonical = to_parsing_canonical_form(fastavro.parse_schema(schema, _write_hint=False))
    return int.from_bytes(hashlib.sha256(canonical.encode()).digest()[:4], "big") & 0x7FFFFFFF


class LocalRegistry:
    """Ids derived from the schemas themselves; no server needed."""

    def __init__(self, schemas: Iterable[dict] = ()):
        self._by_id: dict[int, dict] = {}
        for schema in schemas:
            self.add(schema)

    def add(self, schema: dict) -> int:
        schema_id = local_schema_id(schema)
        self._by_id[schema_id] = schema
        return schema_id

    def id_for(self, schema: dict, subject: str) -> int:
        return self.add(schema)

    def schema_for(self, schema_id: int) -> dict:
        try:
            return self._by_id[schema_id]
        except KeyError:
            raise UnknownSchema(f"schema id {schema_id} is not in the local registry") from None


class UnknownSchema(LookupError):
    pass

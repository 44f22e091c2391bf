"""Schema ids for the Confluent wire format: a real Schema Registry, or a deterministic local one.

Without a registry every process derives the same id from a schema's canonical form, so any process of the
project decodes any record; old schema versions stay decodable as long as their writer schema is known
(`LocalRegistry.add`). With `schema_registry_url` set, ids come from a Confluent Schema Registry.
"""

from __future__ import annotations

import hashlib
import json
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


class ConfluentRegistry:
    """A Confluent Schema Registry through confluent-kafka's client (`url` may be `mock://` in tests)."""

    def __init__(self, url: str | None = None, client_conf: dict | None = None, client=None):
        from confluent_kafka.schema_registry import SchemaRegistryClient

        self._client = client or SchemaRegistryClient.new_client({"url": url, **(client_conf or {})})
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, dict] = {}

    def id_for(self, schema: dict, subject: str) -> int:
        from confluent_kafka.schema_registry import Schema

        text = json.dumps(schema, sort_keys=True)
        key = (subject, text)
        if key not in self._ids:
            self._ids[key] = self._client.register_schema(subject, Schema(text, "AVRO"))
            self._schemas[self._ids[key]] = schema
        return self._ids[key]

    def schema_for(self, schema_id: int) -> dict:
        """Raises UnknownSchema (a poison record, for the codec) when the registry answers 404; other
        registry errors (unreachable, 5xx) propagate: they are not the record's fault."""
        from confluent_kafka.schema_registry.error import SchemaRegistryError

        if schema_id not in self._schemas:
            try:
                found = self._client.get_schema(schema_id)
            except SchemaRegistryError as exc:
                if exc.http_status_code == 404:
                    raise UnknownSchema(f"schema id {schema_id} is not in the schema registry") from None
                raise
            if found.schema_str is None:
                raise UnknownSchema(f"schema id {schema_id} has no schema text in the schema registry")
            self._schemas[schema_id] = json.loads(found.schema_str)
        return self._schemas[schema_id]


class UnknownSchema(LookupError):
    pass

"""A Confluent Schema Registry as the codec's `Registry`, through confluent-kafka's client.

Why here: every use of confluent-kafka lives in `seamlessflow.kafka`; the codec (`seamlessflow.avro`) knows
only the `Registry` protocol, and `codec_for` picks this one when `schema_registry_url` is set.
"""

from __future__ import annotations

import json

from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from seamlessflow.avro.registry import UnknownSchema


class ConfluentRegistry:
    """A Confluent Schema Registry through confluent-kafka's client (`url` may be `mock://` in tests)."""

    def __init__(self, url: str | None = None, client_conf: dict | None = None,
                 client: SchemaRegistryClient | None = None):
        self._client = client or SchemaRegistryClient.new_client({"url": url, **(client_conf or {})})
        self._ids: dict[tuple[str, str], int] = {}
        self._schemas: dict[int, dict] = {}

    def id_for(self, schema: dict, subject: str) -> int:
        text = json.dumps(schema, sort_keys=True)
        key = (subject, text)
        if key not in self._ids:
            self._ids[key] = self._client.register_schema(subject, Schema(text, "AVRO"))
            self._schemas[self._ids[key]] = schema
        return self._ids[key]

    def schema_for(self, schema_id: int) -> dict:
        """Raises UnknownSchema (a poison record, for the codec) when the registry answers 404; other
        registry errors (unreachable, 5xx) propagate: they are not the record's fault."""
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

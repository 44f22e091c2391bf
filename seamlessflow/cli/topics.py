"""`seamlessflow topics list|create` and `seamlessflow tail TOPIC`."""

from __future__ import annotations

import dataclasses
import json

import click
from rich.console import Console
from rich.table import Table

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import ensure_topics, list_topics
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import read_topic
from seamlessflow.topics import Topics, topic_specs


@click.group()
def topics() -> None:
    """Declared topics (infra/topics.yaml) and what the broker has."""


@topics.command("list")
@pass_settings
def topics_list(settings: Settings) -> None:
    actual = list_topics(settings)
    table = Table("topic", "partitions (declared/broker)", "cleanup", "key", "values")
    for spec in topic_specs(settings):
        have = actual.get(spec.full_name)
        table.add_row(spec.full_name, f"{spec.partitions}/{have if have is not None else 'missing'}",
                      spec.cleanup_policy, spec.key, ", ".join(spec.values))
    Console().print(table)


@topics.command("create")
@pass_settings
def topics_create(settings: Settings) -> None:
    created = ensure_topics(settings)
    click.echo(f"created {len(created)} topic(s)" + (": " + ", ".join(created) if created else " (all existed)"))


@click.command()
@click.argument("topic")
@click.option("--team", help="Only records of this team.")
@click.option("--limit", type=int, default=0, help="Stop after this many records (0: all).")
@pass_settings
def tail(settings: Settings, topic: str, team: str | None, limit: int) -> None:
    """Decode and print a topic's records as JSON lines (TOPIC: short name like 'session-events', or full)."""
    names = Topics(settings)
    full = names.specs[topic].full_name if topic in names.specs else topic
    shown = 0
    for record in read_topic(settings, full, codec_for(settings)):
        if record.error:
            click.echo(json.dumps({"offset": record.offset, "partition": record.partition, "error": record.error}))
            continue
        if team and getattr(record.message, "team", None) != team:
            continue
        payload = {"type": type(record.message).__name__, **_jsonable(dataclasses.asdict(record.message))}
        click.echo(json.dumps({"partition": record.partition, "offset": record.offset, **payload}))
        shown += 1
        if limit and shown >= limit:
            break


def _jsonable(data: dict) -> dict:
    return {k: (v.hex() if isinstance(v, bytes) else v) for k, v in data.items()}

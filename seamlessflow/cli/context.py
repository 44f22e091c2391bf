"""Shared CLI plumbing: the settings every command gets from the global options."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click

from seamlessflow.config import Settings

pass_settings = click.make_pass_decorator(Settings)
F = TypeVar("F", bound=Callable[..., Any])


def global_options(func: F) -> F:
    """Options every process understands; each also reads SEAMLESSFLOW_<NAME> and the YAML `--config`."""
    options = [
        click.option("--config", "config_path", type=click.Path(dir_okay=False), help="YAML config file."),
        click.option("--data-dir", type=click.Path(file_okay=False), help="Data directory (default ./.seamlessflow)."),
        click.option("--bootstrap-servers", help="An existing Kafka cluster; no embedded broker is started."),
        click.option("--brokers", type=click.IntRange(1, 9),
                     help="Embedded Kafka (KRaft) nodes (default 1; 3: replication factor 3, min.insync.replicas 2)."),
        click.option("--broker-port", type=int, help="Embedded broker port (default 19092; node N: port + N - 1)."),
        click.option("--broker-host", help="Where the embedded broker listens and is reached (default 127.0.0.1)."),
        click.option("--topic-prefix", help="Topic names are '<prefix>.<name>'."),
        click.option("--schema-registry-url", help="Confluent Schema Registry (default: local deterministic ids)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def load_settings(config_path: str | None, **overrides: Any) -> Settings:
    return Settings.load(config_path, **overrides)

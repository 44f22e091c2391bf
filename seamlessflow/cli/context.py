"""Shared CLI plumbing: the settings every command gets from the global options."""

from __future__ import annotations

import click

from seamlessflow.config import Settings

pass_settings = click.make_pass_decorator(Settings)


def global_options(func):
    """Options every process understands; each also reads SEAMLESSFLOW_<NAME> and the YAML `--config`."""
    options = [
        click.option("--config", "config_path", type=click.Path(dir_okay=False), help="YAML config file."),
        click.option("--data-dir", type=click.Path(file_okay=False), help="Data directory (default ./.seamlessflow)."),
        click.option("--bootstrap-servers", help="An existing Kafka cluster; no embedded broker is started."),
        click.option("--broker", type=click.Choice(["s3", "memory"]), help="Embedded broker storage."),
        click.option("--broker-port", type=int, help="Embedded broker port (default 19092)."),
        click.option("--s3-port", type=int, help="Embedded broker's local S3 port (default 19000)."),
        click.option("--topic-prefix", help="Topic names are '<prefix>.<name>'."),
        click.option("--schema-registry-url", help="Confluent Schema Registry (default: local deterministic ids)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def load_settings(config_path, **overrides) -> Settings:
    return Settings.load(config_path, **overrides)

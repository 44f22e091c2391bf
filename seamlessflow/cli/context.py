"""Shared CLI plumbing: the settings every command gets from the global options, and a placement's refusal
as one line."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from typing import Any, TextIO, TypeVar

import click

from seamlessflow.config import Settings
from seamlessflow.stack.placement_protocol import PlacementError

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


@contextlib.contextmanager
def placement_errors() -> Iterator[None]:
    """What a placement refuses (an unreachable cluster, a request no node can give, a stack it cannot add to)
    is said in one line, not a traceback."""
    try:
        yield
    except PlacementError as exc:
        raise click.ClickException(str(exc)) from None


@contextlib.contextmanager
def data_only_stdout() -> Iterator[TextIO]:
    """The process's stdout kept for the data a command prints (`status --json | jq`), with file descriptor 1
    pointed at stderr for the rest of the process. A Ray driver relays a dying raylet's backtrace to fd 1, even
    after the command has returned (CI saw `status --json` end in one), and no library can break the JSON then."""
    sys.stdout.flush()
    if not _writes_to_fd_1(sys.stdout):  # an in-process runner's captured stream: nothing to guard
        yield sys.stdout
        return
    with os.fdopen(os.dup(1), "w") as data:
        os.dup2(2, 1)
        yield data


def _writes_to_fd_1(stream: TextIO) -> bool:
    try:
        return stream.fileno() == 1
    except (AttributeError, OSError, ValueError):
        return False

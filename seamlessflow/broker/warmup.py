"""Dumps the broker JVM's class archive (`class_archive`) from one broker's start: `make install` runs it.

    python -m seamlessflow.broker.warmup     # prints where the archive is; exit 0 also when it could not be made

A Java without a base class archive cannot dump one on top of it; the brokers then run without, as before, and
this says so instead of failing the install.
"""

from __future__ import annotations

import os
import shlex
import tempfile
from pathlib import Path

import click

from seamlessflow.broker.class_archive import archive_path, dump_options
from seamlessflow.broker.local import LocalBroker

OPTIONS_ENV = "SEAMLESSFLOW_BROKER_JVM_OPTIONS"


def dump_archive(target: Path) -> bool:
    """Formats a broker in a scratch directory, then starts it with the dump options and stops it: the JVM
    writes the classes it loaded to `target` as it exits. True when the archive is there."""
    partial = target.with_name(f"{target.name}.{os.getpid()}.part")
    before = os.environ.get(OPTIONS_ENV)
    with tempfile.TemporaryDirectory(prefix="sf-broker-warmup-") as scratch:
        broker = LocalBroker(Path(scratch))
        broker.prepare()  # the storage tool's own JVM runs without the dump options
        os.environ[OPTIONS_ENV] = shlex.join([*shlex.split(before or ""), *dump_options(partial)])
        try:
            broker.start()
            broker.stop()
        finally:
            os.environ.pop(OPTIONS_ENV) if before is None else os.environ.update({OPTIONS_ENV: before})
    if not partial.is_file():
        return False
    partial.rename(target)
    return True


@click.command()
def main() -> None:
    """Writes the archive once per Java and set of jars."""
    target = archive_path()
    if target.is_file():
        click.echo(f"broker class archive: {target}")
    elif dump_archive(target):
        click.echo(f"broker class archive: {target} ({target.stat().st_size >> 20} MiB)")
    else:
        click.echo("broker class archive: this Java could not write one; the brokers start without it")


if __name__ == "__main__":
    main()

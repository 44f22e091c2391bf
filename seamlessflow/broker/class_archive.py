"""The broker JVM's class archive (AppCDS): Kafka's classes parsed and verified once, at install, then mapped.

Why: a broker's start is mostly loading and verifying Kafka's classes. Measured on 2 cores with Kafka 4.3 and
Java 17 (`benchmarks/bench_broker.py --class-archive`; `docs/performance/broker.md`), mapping them
from an archive took a broker's life (format, start, stop) from 8.1 to 5.0 CPU-s with `up`'s JVM options and
from 4.9 to 2.7 with the test suite's C1-only ones, and it answered 1.7-3.4 s sooner; the test suite starts
about thirty brokers and every `up` one or three. `python -m seamlessflow.broker.warmup` (run by `make
install`) dumps the archive from one broker's start; without one the brokers run as before.

The archive is valid for one Java build and one classpath, so its name carries both: another Java, or new jars
after a version change, look for an archive of their own (the JVM also checks it, and runs without it when it
does not match).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from seamlessflow.broker.jars import LOCK_FILE, libs_dir
from seamlessflow.broker.java import java_binary


def archive_path() -> Path:
    """Where this Java's archive of the locked jars lives, beside the jars."""
    java = Path(java_binary()).resolve()
    key = hashlib.sha256(f"{java}\n{java.stat().st_mtime_ns}\n{LOCK_FILE.read_text()}".encode()).hexdigest()
    return libs_dir().parent / f"classes-{key[:16]}.jsa"


def share_options() -> list[str]:
    """The JVM options that map the archive, or none when there is none yet (or SEAMLESSFLOW_BROKER_CLASS_ARCHIVE
    is `off`: `benchmarks/bench_broker.py --class-archive` compares the two)."""
    archive = archive_path()
    wanted = os.environ.get("SEAMLESSFLOW_BROKER_CLASS_ARCHIVE", "on") != "off"
    return [f"-XX:SharedArchiveFile={archive}"] if wanted and archive.is_file() else []


def dump_options(target: Path) -> list[str]:
    """The JVM options that write the classes this run loads to `target` when it exits."""
    return [f"-XX:ArchiveClassesAtExit={target}"]

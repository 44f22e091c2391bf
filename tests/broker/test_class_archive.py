"""The install's class archive for the broker JVM (`seamlessflow.broker.class_archive`): made by `make install`,
and a broker's JVM maps Kafka's classes from it instead of loading them from the jars."""

from __future__ import annotations

import subprocess

from seamlessflow.broker.class_archive import archive_path, share_options
from seamlessflow.broker.kraft import java_command


def class_sources(main_class: str) -> dict[str, str]:
    """Where the JVM that `java_command` builds took each class from (its class-loading log)."""
    argv = java_command(main_class)
    argv.insert(1, "-Xlog:class+load=info")
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
    rows = (line.split("[class,load] ", 1)[1] for line in out.splitlines() if "[class,load] " in line)
    return dict(row.split(" source: ", 1) for row in rows if " source: " in row)


def test_the_install_made_an_archive_and_the_broker_jvm_maps_kafka_from_it():
    assert archive_path().is_file(), "make install runs `python -m seamlessflow.broker.warmup`; it wrote none"
    assert share_options() == [f"-XX:SharedArchiveFile={archive_path()}"]
    sources = class_sources("kafka.Kafka")  # no arguments: it prints its usage and exits
    for name in ("kafka.Kafka", "kafka.server.Server", "org.apache.kafka.common.utils.Utils"):
        assert sources[name] == "shared objects file (top)", f"{name}: {sources[name]}"


def test_a_dumping_jvm_does_not_map_an_archive(monkeypatch):
    monkeypatch.setenv("SEAMLESSFLOW_BROKER_JVM_OPTIONS", "-XX:ArchiveClassesAtExit=/tmp/x.jsa")
    assert not any(option.startswith("-XX:SharedArchiveFile") for option in java_command("kafka.Kafka"))

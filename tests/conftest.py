"""Shared fixtures: a real embedded broker (Tansu) for the session, and per-test isolated topics."""

from __future__ import annotations

import os
import socket
import subprocess
import uuid
from pathlib import Path

import pytest

from seamlessflow.broker.embedded import embedded_processes
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import ensure_topics, wait_for_broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class BrokerProcess:
    """The embedded broker started as real processes; `restart()` keeps its data directory."""

    def __init__(self, data_dir: Path, mode: str):
        self.settings = Settings(data_dir=data_dir, broker=mode, broker_port=free_port(), s3_port=free_port())
        self.procs: list[subprocess.Popen] = []

    def start(self) -> "BrokerProcess":
        logs = Path(self.settings.data_dir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for spec in embedded_processes(self.settings):
            out = open(logs / f"{spec.name}.log", "ab")
            self.procs.append(subprocess.Popen(spec.argv, env={**os.environ, **spec.env}, stdout=out, stderr=out))
        wait_for_broker(self.settings.with_overrides(bootstrap_servers=self.settings.kafka_bootstrap), 60)
        return self

    def stop(self, kill: bool = False) -> None:
        for proc in reversed(self.procs):
            proc.kill() if kill else proc.terminate()
            proc.wait(timeout=15)
        self.procs = []

    def restart(self) -> None:
        self.stop()
        self.start()

    @property
    def client_settings(self) -> Settings:
        return self.settings.with_overrides(bootstrap_servers=self.settings.kafka_bootstrap)


@pytest.fixture(scope="session")
def broker(tmp_path_factory) -> BrokerProcess:
    """One in-memory broker for the whole test session; tests isolate themselves by topic prefix."""
    proc = BrokerProcess(tmp_path_factory.mktemp("broker"), "memory").start()
    yield proc
    proc.stop()


@pytest.fixture
def settings(broker, tmp_path) -> Settings:
    """Client settings with a fresh topic prefix (all declared topics created) and a fresh data dir."""
    s = broker.client_settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:10]}", data_dir=tmp_path / "data")
    ensure_topics(s)
    return s


@pytest.fixture
def codec():
    from seamlessflow.avro import Codec

    return Codec()

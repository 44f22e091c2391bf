"""The embedded broker as plain child processes, for tests and benchmarks (the supervisor runs it for `up`)."""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path

from seamlessflow.broker.embedded import embedded_processes
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import wait_for_broker


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalBroker:
    """Tansu (memory or S3-on-disk) on free ports; `restart()` keeps its data directory."""

    def __init__(self, data_dir: Path, mode: str = "memory"):
        self.settings = Settings(data_dir=data_dir, broker=mode, broker_port=free_port(), s3_port=free_port())
        self.procs: list[subprocess.Popen] = []

    @property
    def client_settings(self) -> Settings:
        return self.settings.with_overrides(bootstrap_servers=self.settings.kafka_bootstrap, idempotent_producer=False)

    def start(self) -> "LocalBroker":
        logs = Path(self.settings.data_dir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        for spec in embedded_processes(self.settings):
            with open(logs / f"{spec.name}.log", "ab") as out:
                self.procs.append(subprocess.Popen(spec.argv, env={**os.environ, **spec.env}, stdout=out, stderr=out))
        wait_for_broker(self.client_settings, 60)
        return self

    def stop(self, kill: bool = False) -> None:
        for proc in reversed(self.procs):
            proc.kill() if kill else proc.terminate()
            proc.wait(timeout=15)
        self.procs = []

    def restart(self) -> None:
        self.stop()
        self.start()

    def __enter__(self) -> "LocalBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

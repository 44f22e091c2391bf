"""The embedded broker as plain child processes, for tests and benchmarks (the supervisor runs it for `up`)."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path
from typing import Self

from seamlessflow.broker.kraft import node_processes, prepare
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import wait_for_cluster
from seamlessflow.ports import free_port_block


class LocalBroker:
    """Apache Kafka (KRaft, `brokers` nodes) on free ports; `restart()` keeps its data directory."""

    def __init__(self, data_dir: Path, brokers: int = 1):
        base = free_port_block(2 * brokers)
        self.settings = Settings(data_dir=data_dir, brokers=brokers, broker_port=base)  # controllers: the next ports
        self.procs: dict[str, subprocess.Popen] = {}

    @property
    def client_settings(self) -> Settings:
        return self.settings.with_overrides(bootstrap_servers=self.settings.kafka_bootstrap)

    def start(self, timeout_s: float = 90) -> Self:
        logs = Path(self.settings.data_dir) / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        self.prepare()
        for spec in node_processes(self.settings):
            if spec.name not in self.procs or self.procs[spec.name].poll() is not None:
                self.procs[spec.name] = self._spawn(spec.argv, logs / f"{spec.name}.log")
        wait_for_cluster(self.client_settings, self.settings.brokers, timeout_s)
        return self

    def prepare(self) -> None:
        """Every node's properties written and its storage formatted (a subclass may write its own after)."""
        prepare(self.settings)

    @staticmethod
    def _spawn(argv: list[str], log: Path) -> subprocess.Popen:
        with open(log, "ab") as out:
            return subprocess.Popen(argv, env=dict(os.environ), stdout=out, stderr=out)

    def kill(self, name: str) -> None:
        """kill -9 one node (`broker`, or `broker-N` in a cluster); `start()` brings it back."""
        proc = self.procs.pop(name)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def stop(self, kill: bool = False) -> None:
        for proc in self.procs.values():
            proc.kill() if kill else proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        self.procs = {}

    def restart(self, kill: bool = False) -> None:
        self.stop(kill)
        self.start()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

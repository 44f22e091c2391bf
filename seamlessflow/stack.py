"""What `seamlessflow up` runs, in order: the embedded broker (unless pointed at a cluster), topics, services.

Each service is started as `python -m services.<name> --config <effective config>`, so a service runs the
same way under the supervisor, by hand, or in a container on a real cluster.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path

from seamlessflow.broker.embedded import embedded_processes
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import broker_ready, ensure_topics
from seamlessflow.supervisor import ServiceSpec, Supervisor


def run_dir(settings: Settings) -> Path:
    return Path(settings.data_dir).resolve() / "run"


def log_dir(settings: Settings) -> Path:
    return Path(settings.data_dir).resolve() / "logs"


def config_path(settings: Settings) -> Path:
    return run_dir(settings) / "config.yaml"


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def broker_services(settings: Settings) -> list[ServiceSpec]:
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    ready = {"s3": lambda: port_open(settings.s3_port), "broker": lambda: broker_ready(client, 1.0)}
    return [ServiceSpec(p.name, p.argv, p.env, ready[p.name], 60) for p in embedded_processes(settings)]


def python_service(settings: Settings, name: str, *args: str, ready=None, timeout_s: float = 120) -> ServiceSpec:
    argv = [sys.executable, "-m", f"services.{name}", "--config", str(config_path(settings)), *args]
    return ServiceSpec(name, argv, {"PYTHONUNBUFFERED": "1"}, ready, timeout_s)


def app_services(settings: Settings) -> list[ServiceSpec]:
    """The project's own services, in start order; each is enabled in its config section."""
    return []


def start_stack(settings: Settings, supervisor: Supervisor) -> None:
    settings.dump_yaml(config_path(settings))
    for spec in broker_services(settings):
        supervisor.start(spec)
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    ensure_topics(client)
    supervisor.info["bootstrap_servers"] = settings.kafka_bootstrap
    supervisor.info["topic_prefix"] = settings.topic_prefix
    for spec in app_services(settings):
        supervisor.start(spec)
    supervisor.ready = True
    supervisor.write_state()

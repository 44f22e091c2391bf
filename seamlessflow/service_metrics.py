"""Prometheus `/metrics` for every service (the proxy serves its own on its API port).

A service started with `SEAMLESSFLOW_METRICS_PORT` set (`seamlessflow up` gives each one a port from
`metrics.port`) serves the process figures (CPU, memory, file descriptors, GC) and the figures of the last
heartbeat it published, so what Prometheus scrapes is what the status topic says: a gauge per heartbeat
figure, the weight version and the active tag. Heartbeats are observed where every service sends them
(`MessageProducer.send`), so no service needs code of its own for this.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterator

from prometheus_client import REGISTRY, start_http_server
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from seamlessflow.messages import ResourceStatus

PORT_ENV = "SEAMLESSFLOW_METRICS_PORT"
log = logging.getLogger(__name__)


class StatusCollector(Collector):
    """The latest heartbeat this process published per resource, as gauges."""

    def __init__(self) -> None:
        self._latest: dict[str, ResourceStatus] = {}
        self._lock = threading.Lock()

    def observe(self, status: ResourceStatus) -> None:
        with self._lock:
            self._latest[status.resource_id] = status

    def collect(self) -> Iterator[GaugeMetricFamily]:
        with self._lock:
            statuses = list(self._latest.values())
        figure = GaugeMetricFamily("seamlessflow_figure", "A figure of the resource's last heartbeat",
                                   labels=["resource_id", "kind", "figure"])
        version = GaugeMetricFamily("seamlessflow_weight_version", "Policy version the resource holds",
                                    labels=["resource_id", "kind"])
        active = GaugeMetricFamily("seamlessflow_active", "1 for the resource's active tag and state",
                                   labels=["resource_id", "kind", "active_tag", "state"])
        for s in statuses:
            for name, value in sorted(s.figures.items()):
                figure.add_metric([s.resource_id, s.kind, _label(name)], float(value))
            version.add_metric([s.resource_id, s.kind], float(s.weight_version))
            active.add_metric([s.resource_id, s.kind, s.active_tag, s.state], 1.0)
        yield from (figure, version, active)


def _label(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9_:]", "_", name)


STATUSES = StatusCollector()  # one per process, like prometheus_client's default registry
_serving: list[int] = []


def observe(message: object) -> None:
    """Called for every record a service sends; keeps heartbeats only."""
    if isinstance(message, ResourceStatus):
        STATUSES.observe(message)


def serve_metrics(port: int | None = None, host: str = "127.0.0.1") -> int | None:
    """Starts `/metrics` on `port` (default: $SEAMLESSFLOW_METRICS_PORT; neither: nothing) in a daemon
    thread. A port already taken is logged, not fatal: metrics never stop a service."""
    port = port if port is not None else int(os.environ.get(PORT_ENV) or 0) or None
    if port is None or _serving:
        return _serving[0] if _serving else None
    try:
        start_http_server(port, addr=host)
    except OSError as exc:
        log.warning("no /metrics on %s:%d (%s)", host, port, exc)
        return None
    REGISTRY.register(STATUSES)
    _serving.append(port)
    log.info("metrics on http://%s:%d/metrics", host, port)
    return port

"""The stack's /metrics URLs, <data_dir>/run/metrics.json ({service: URL}), kept as the stack changes.

`up` writes it for the services it starts (`services.metrics_ports`). A service added to the running stack
later (`seamlessflow scale`, the autoscaler: `scale.reconcile` on this machine, `scale.scale_engines` on Ray)
gets its port and its entry here before it starts, and a drained one leaves the list once it is stopped, so
the dashboard (and a Prometheus fed from the file) scrapes the stack as it runs now, not as `up` left it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from urllib.parse import urlsplit

from seamlessflow.config import Settings
from seamlessflow.service_metrics import PORT_ENV
from seamlessflow.stack.options import MetricsOptions
from seamlessflow.stack.paths import run_dir
from seamlessflow.stack.supervisor import ServiceSpec

OWN_METRICS = ("proxy", "dashboard")  # serve /metrics on their own HTTP port: no port of `metrics.port`'s


def metrics_file(settings: Settings) -> Path:
    return run_dir(settings) / "metrics.json"


def listed_urls(settings: Settings) -> dict[str, str]:
    """{service: /metrics URL} as the stack lists them now ({} before `up` wrote the file)."""
    path = metrics_file(settings)
    return json.loads(path.read_text()) if path.exists() else {}


def write_urls(settings: Settings, urls: dict[str, str]) -> None:
    """Replaces the file whole (written aside, then renamed): the dashboard reads it on every request."""
    path = metrics_file(settings)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(urls, indent=1))
    os.replace(tmp, path)


def add_metrics_port(settings: Settings, spec: ServiceSpec) -> str | None:
    """Gives `spec`, a service joining the running stack, its own /metrics port (`spec.env[PORT_ENV]`) and
    lists its URL; returns the URL (None for the proxy and the dashboard, as in `metrics_ports`). A name the
    file lists already keeps its port. Otherwise the port is one above every `metrics.port` port listed (never
    below `metrics.port`): so it cannot be a running service's, in whatever order services came and went, with
    no record but the file. A drained service's port can come back this way (when it was the highest), and
    that is safe and wanted: its entry leaves only once its process is gone (`drop_metrics_port` runs after
    the placement's stop, which waits for the exit), and what scales down are the newest services, on the
    highest ports, so an autoscaler adding and draining all day reuses a few ports instead of walking up the
    port range into other servers' ports. A scrape of a reused URL at worst sees the new service's figures,
    which are labelled by its own resource id."""
    if spec.name in OWN_METRICS:
        return None
    metrics = MetricsOptions.from_settings(settings)
    urls = listed_urls(settings)
    if spec.name in urls:
        port = urlsplit(urls[spec.name]).port or metrics.port
    else:
        used = [urlsplit(url).port or 0 for name, url in urls.items() if name not in OWN_METRICS]
        port = max([metrics.port - 1, *used]) + 1
    spec.env[PORT_ENV] = str(port)
    urls[spec.name] = f"http://{metrics.host}:{port}/metrics"
    write_urls(settings, urls)
    return urls[spec.name]


def drop_metrics_port(settings: Settings, name: str) -> None:
    """Takes a drained (stopped) service off the list, so nothing scrapes or shows a process that is gone."""
    urls = listed_urls(settings)
    if urls.pop(name, None) is not None:
        write_urls(settings, urls)

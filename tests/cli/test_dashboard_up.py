"""`seamlessflow up` prints the dashboard's URL and serves it, and every service it runs serves /metrics
(here the broker with the metrics sink and the dashboard: no model needed)."""

import json
import urllib.request

import pytest

from seamlessflow.ports import free_port_block
from seamlessflow.testing.cli import run_cli
from seamlessflow.testing.waiting import wait_until


def get(url: str) -> str:
    return urllib.request.urlopen(url, timeout=10).read().decode()


def get_or_empty(url: str) -> str:
    try:
        return get(url)
    except OSError:
        return ""


@pytest.mark.timeout(150)
@pytest.mark.slow
def test_up_prints_the_dashboard_url_and_services_serve_metrics(tmp_path):
    port, web, metrics = free_port_block(2), free_port_block(1), free_port_block(2)
    extra = ["--only", "tracking", "--only", "dashboard"]
    env_config = tmp_path / "config.yaml"
    env_config.write_text(json.dumps({"dashboard": {"port": web}, "metrics": {"port": metrics}}))
    started = run_cli(tmp_path, port, "--config", str(env_config), "up", "--detach", *extra, timeout=180)
    try:
        assert started.returncode == 0, started.stdout + started.stderr
        assert f"dashboard: http://127.0.0.1:{web}/" in started.stdout
        overview = json.loads(get(f"http://127.0.0.1:{web}/api/overview"))
        assert {s["name"] for s in overview["services"]} >= {"tracking", "dashboard"}
        urls = json.loads((tmp_path / "run" / "metrics.json").read_text())
        for name in ("tracking", "dashboard"):  # a service serves /metrics a moment after it started
            url = urls[name]
            try:
                wait_until(lambda u=url: "process_cpu_seconds_total" in get_or_empty(u), what=f"{name}'s /metrics",
                           every_s=0.3)
            except AssertionError as exc:  # say why: the service's own log (a port taken, a crash)
                log = tmp_path / "logs" / f"{name}.log"
                raise AssertionError(f"{exc}; {log}:\n{log.read_text()[-4000:] if log.exists() else 'none'}") from exc
        assert '<svg id="chart-reward"' in get(f"http://127.0.0.1:{web}/")
    finally:
        run_cli(tmp_path, port, "down")

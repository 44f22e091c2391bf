"""`python -m services.scheduler --config FILE`, as the supervisor starts it: heartbeats, publishes tasks,
and exits 0 on SIGTERM."""

import signal
import subprocess
import sys

import pytest

from seamlessflow.scheduler.health import scheduler_ready
from seamlessflow.status_rows import resource_rows
from seamlessflow.testing.waiting import wait_until

pytestmark = pytest.mark.timeout(120)


def test_process_heartbeats_publishes_tasks_and_stops_on_sigterm(settings, tmp_path):
    config = settings.with_overrides(scheduler={"policy": "colocated", "tick_s": 0.2},
                                     manager={"group_size": 2, "max_in_flight": 2})
    path = config.dump_yaml(tmp_path / "config.yaml")
    ready = scheduler_ready(settings)
    assert not ready()
    proc = subprocess.Popen([sys.executable, "-m", "services.scheduler", "--config", str(path)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        def two_published() -> dict | None:
            row = next((r for r in resource_rows(settings) if r["id"] == "scheduler"), None)
            return row if row is not None and row["figures"].get("tasks_published") == 2.0 else None

        row = wait_until(two_published, 60, "a scheduler heartbeat with 2 tasks published", every_s=0.3,
                         alive=[proc])
        assert (row["kind"], row["active_tag"], row["state"]) == ("scheduler", "colocated", "active")
        assert ready()
    finally:
        proc.send_signal(signal.SIGTERM)
        code = proc.wait(30)
    assert code == 0, proc.stdout.read().decode()

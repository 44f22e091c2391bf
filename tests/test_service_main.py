"""The one entry shape of the long-running services: /metrics served, SIGTERM ends the loop cleanly."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import urllib.request

from seamlessflow.ports import free_port
from seamlessflow.service_metrics import PORT_ENV

SERVICE = """
from seamlessflow.service_main import run_until_signal
def run(settings, stop, args):
    print("ready", args.resource_id, settings.team, flush=True)
    print("stopped" if stop.wait(60) else "timed out", flush=True)
run_until_signal("services.demo", run, add_arguments=lambda p: p.add_argument("--resource-id"))
"""


def test_a_service_serves_metrics_and_stops_on_sigterm():
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVICE, "--resource-id", "r-1"], stdout=subprocess.PIPE,
                            text=True, env={**os.environ, PORT_ENV: str(port)})
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().split() == ["ready", "r-1", "default"]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
            assert response.status == 200 and b"python_info" in response.read()
        proc.send_signal(signal.SIGTERM)
        assert proc.stdout.readline().strip() == "stopped"
        assert proc.wait(30) == 0
    finally:
        proc.kill()


EXITING = """
from seamlessflow.service_main import run_until_signal
def prepare(settings, args):
    print("prepared", args.config is None, flush=True)
run_until_signal("services.demo", lambda settings, stop, args: 3, prepare=prepare, metrics=False)
"""


def test_the_prepare_hook_runs_first_and_an_int_result_is_the_exit_code():
    done = subprocess.run([sys.executable, "-c", EXITING], capture_output=True, text=True, timeout=120)
    assert (done.returncode, done.stdout.split()) == (3, ["prepared", "True"])

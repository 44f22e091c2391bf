"""A test stopped by pytest-timeout reports, through xdist, its threads' stacks and the end of its services' logs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from seamlessflow.testing.timeout_logs import log_tails, recent_logs

HANGING = '''
import subprocess, sys, threading, time

import pytest

SERVICE = "import sys, time\\nfor i in range(100): print('service line', i)\\nsys.stdout.flush()\\ntime.sleep(60)"


@pytest.mark.timeout(3)
def test_hangs(tmp_path):
    (tmp_path / "exited.log").write_text("the service that exited said goodbye\\n")
    with open(tmp_path / "service.log", "w") as log:
        service = subprocess.Popen([sys.executable, "-c", SERVICE], stdout=log)
    threading.Thread(target=time.sleep, args=(60,), name="waiter", daemon=True).start()
    try:
        time.sleep(60)
    finally:
        service.kill()
        service.wait()


def test_after_it():
    pass
'''


def test_a_timeout_reports_every_thread_and_the_tail_of_each_service_log_through_xdist(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "from seamlessflow.testing import timeout_logs\n\n\ndef pytest_configure(config):\n"
        "    timeout_logs.register(config)\n")
    (suite / "pytest.ini").write_text("[pytest]\ntimeout = 60\ntimeout_method = signal\n")
    (suite / "test_hang.py").write_text(HANGING)
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    argv = [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "pytest_timeout", "-n", "1", "-q",
            "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'tmp'}", str(suite)]
    done = subprocess.run(argv, cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 1 and "1 failed, 1 passed" in out, out
    assert "Timeout (>3.0s) from pytest-timeout" in out
    assert "Stack of waiter" in out  # another thread's stack, in the captured output the worker sent back
    logs = out[out.index("Logs of the test's services at its timeout"):]
    assert "service line 99" in logs and "service line 60" in logs and "service line 59" not in logs  # 40 lines
    assert "the service that exited said goodbye" in logs  # closed, but written during the test


def test_logs_are_the_text_files_written_since_the_test_began_newest_first(tmp_path):
    old, new, segment, binary = (tmp_path / name for name in ("old.log", "new.out", "00000000000000000000.log",
                                                             "b.err"))
    old.write_text("old\n")
    os.utime(old, (1, 1))
    new.write_text("".join(f"{i}\n" for i in range(50)))
    segment.write_text("kafka's data\n")
    binary.write_bytes(b"\0\1")
    found = recent_logs(tmp_path, since=100)
    assert found == {new, binary}  # not the older one, not a Kafka segment
    printed = log_tails([*found, old], most_files=2)
    assert printed.splitlines()[0] == f"--- {new} (last 40 lines)"
    assert printed.splitlines()[1:41] == [str(i) for i in range(10, 50)]
    assert printed.splitlines()[-1] == f"--- 1 more log(s), older: {old}"
    assert "b.err" not in printed  # binary: no tail
    assert log_tails([Path(tmp_path / "gone.log")]) == "no log written by the test's services was found"

"""A rollout worker killed -9 leaves its engine running (own session); the next worker's start reaps it."""

import os
import signal
import subprocess
import sys

import psutil

from seamlessflow.rollout.options import RolloutOptions, WorkerSpec
from seamlessflow.rollout.vllm_process import EngineProcess, reap_leftover, remember
from seamlessflow.testing.waiting import wait_until


def _sleeper() -> subprocess.Popen:
    # a group leader with a child, like vLLM's server and its engine core
    code = ("import subprocess, sys, time; "
            "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)")
    return subprocess.Popen([sys.executable, "-c", code], start_new_session=True)


def test_a_leftover_engine_and_its_group_are_killed_and_the_record_dropped(tmp_path):
    proc = _sleeper()
    path = tmp_path / "rollout-0-engine.pid"
    remember(path, proc.pid)
    [child] = wait_until(lambda: psutil.Process(proc.pid).children(), 10, "the sleeper's child", every_s=0.05)
    assert reap_leftover(path)
    proc.wait(5)
    psutil.wait_procs([child], timeout=5)
    assert not child.is_running() and not path.exists()


def test_a_reused_pid_is_not_killed(tmp_path):
    proc = _sleeper()
    try:
        path = tmp_path / "e.pid"
        path.write_text(f'{{"pid": {proc.pid}, "create_time": 1.0}}')  # same pid, another process's start time
        assert not reap_leftover(path)
        assert proc.poll() is None and not path.exists()
        assert not reap_leftover(tmp_path / "missing.pid")
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def test_the_pid_file_lives_beside_the_engine_log(tmp_path):
    engine = EngineProcess(RolloutOptions(), WorkerSpec(), tmp_path / "logs" / "rollout-0-engine.log")
    assert engine.pid_path == tmp_path / "logs" / "rollout-0-engine.pid"

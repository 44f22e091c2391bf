"""A DeepSpeed start killed while torch holds its op-build lock must not block the next start."""

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from seamlessflow.training.ops import EXTENSIONS_ENV, extensions_dir, op_build_lock

FORK = multiprocessing.get_context("fork")


def _hold_lock_then_report(ready) -> None:
    with op_build_lock() as root:
        (root / "deepspeed_shm_comm").mkdir(exist_ok=True)
        (root / "deepspeed_shm_comm" / "lock").touch()  # what torch's FileBaton leaves on kill -9
        ready.set()
        signal.pause()


def test_extensions_are_built_inside_the_virtual_environment_by_default(monkeypatch):
    monkeypatch.delenv(EXTENSIONS_ENV, raising=False)
    assert extensions_dir().parent.resolve() == Path(sys.prefix).resolve()


@pytest.fixture
def holder(monkeypatch, tmp_path):
    """A process holding the build lock, with torch's lock file planted, until the test kills it."""
    monkeypatch.setenv(EXTENSIONS_ENV, str(tmp_path))
    ready = FORK.Event()
    process = FORK.Process(target=_hold_lock_then_report, args=(ready,))
    process.start()
    assert ready.wait(30)
    yield process
    if process.is_alive():
        process.kill()


def test_a_start_killed_inside_the_lock_leaves_nothing_that_blocks_the_next(holder, tmp_path):
    os.kill(holder.pid, signal.SIGKILL)
    holder.join(10)
    assert (tmp_path / "deepspeed_shm_comm" / "lock").exists()
    with op_build_lock():  # the kernel dropped the flock; the stale torch lock goes
        assert not (tmp_path / "deepspeed_shm_comm" / "lock").exists()


def test_a_live_holder_keeps_others_out(holder):
    entered = FORK.Event()
    waiter = FORK.Process(target=_enter_and_report, args=(entered,))
    waiter.start()
    assert not entered.wait(1.0)
    os.kill(holder.pid, signal.SIGKILL)
    assert entered.wait(30)
    waiter.join(10)


def _enter_and_report(entered) -> None:
    with op_build_lock():
        entered.set()


def test_deepspeed_ops_load_although_a_killed_build_left_its_lock():
    """The CI hang: torch's lock file from a killed start made every later start wait for ever."""
    stale = extensions_dir() / "deepspeed_shm_comm" / "lock"
    stale.parent.mkdir(parents=True, exist_ok=True)
    stale.touch()
    code = "from seamlessflow.training.ops import preload_ops; print(preload_ops())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "shm_comm" in done.stdout and not stale.exists()

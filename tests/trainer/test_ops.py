"""A DeepSpeed start killed while torch holds its op-build lock must not block the next start."""

import multiprocessing
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from seamlessflow.trainer.ops import EXTENSIONS_ENV, extensions_dir, op_build_lock

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
    code = "from seamlessflow.trainer.ops import preload_ops; print(preload_ops())"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "shm_comm" in done.stdout and not stale.exists()


def test_arch_lists_lose_arch_specific_suffixes_for_deepspeeds_parser(monkeypatch):
    from seamlessflow.trainer.ops import ARCH_LIST_ENV, normalise_arch_list, plain_arch_list

    assert plain_arch_list("9.0a") == "9.0"
    assert plain_arch_list("8.0;8.6;9.0a+PTX") == "8.0;8.6;9.0+PTX"
    assert plain_arch_list("9.0 9.0a 10.0f") == "9.0 10.0"
    assert plain_arch_list("7.5;8.0") == "7.5;8.0"
    monkeypatch.setenv(ARCH_LIST_ENV, "9.0a")
    assert normalise_arch_list() == "9.0" and os.environ[ARCH_LIST_ENV] == "9.0"
    monkeypatch.delenv(ARCH_LIST_ENV)
    assert normalise_arch_list() is None


def test_deepspeeds_own_parser_accepts_the_normalised_list(monkeypatch):
    """DeepSpeed's CUDA op builders (fused Adam here) parse the list before compiling: no GPU needed."""
    from deepspeed.ops.op_builder.fused_adam import FusedAdamBuilder

    from seamlessflow.trainer.ops import ARCH_LIST_ENV, normalise_arch_list

    monkeypatch.setenv(ARCH_LIST_ENV, "8.0;9.0a")
    with pytest.raises(ValueError, match="0a"):
        FusedAdamBuilder().compute_capability_args()
    monkeypatch.setenv(ARCH_LIST_ENV, "8.0;9.0a")
    normalise_arch_list()
    args = " ".join(FusedAdamBuilder().compute_capability_args())
    assert "compute_90" in args and "compute_80" in args

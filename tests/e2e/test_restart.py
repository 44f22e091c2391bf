"""`up` after `down`, and `up` after a kill -9 of everything, on the same data directory (slow: the real stack).

The bug this guards: the control topic is compacted and the broker durable, so each resource's newest command
survives `down`; a starting rollout worker restored it, so a flexible worker stopped while lent to training
started in train, and `up` waited (15 minutes) for it to serve in the rollout role before starting the
scheduler that could send it back. Now a start of the stack is a new generation: a previous generation's
command is never carried out on start (`seamlessflow.core.control`), and `up` waits for engines, not roles.

The stack is the embedded default with the test's random tiny model and lean engines, without the eval,
tracking and dashboard services (not what is tested here). The scheduler is frozen (SIGSTOP) the moment
rollout-1's newest command is "switch to train", so `down` happens while it is lent to training.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.messages import ControlCommand, WeightVersion
from seamlessflow.ports import free_port, free_port_block
from seamlessflow.scheduler.reading import messages_until
from seamlessflow.stack.processes import stack_processes
from seamlessflow.testing.stack_logs import log_tails
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.topics import Topics

pytestmark = [pytest.mark.slow, pytest.mark.timeout(2400)]
FLEXIBLE = "rollout-1"


class Stack:
    """The CLI as a user runs it, against one data directory."""

    def __init__(self, tmp_path, model_dir):
        self.data_dir, self.port = tmp_path / "data", free_port_block(2)
        proxy = free_port()
        config = {
            "services": {"eval": False, "tracking": False, "dashboard": False},
            "stop_grace_s": 5,
            "metrics": {"port": free_port_block(12)},
            "proxy": {"port": proxy},
            "agents": {"proxy_url": f"http://127.0.0.1:{proxy}"},
            "rollout": {"model": str(model_dir), "max_model_len": 256, "optimization_level": 0,
                        "extra_args": LEAN_ENGINE_ARGS, "env": LEAN_ENGINE_ENV},
            "trainer": {"checkpoint_every": 1},
        }
        self.config = tmp_path / "config.yaml"
        self.config.write_text(json.dumps(config))
        self.settings = Settings(data_dir=self.data_dir, broker_port=self.port)
        self.codec = codec_for(self.settings)

    def sf(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        cmd = [sys.executable, "-m", "seamlessflow", "--config", str(self.config), "--data-dir", str(self.data_dir),
               "--broker-port", str(self.port), *args]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)

    def up(self, wait_s: float) -> float:
        """`up --detach`; returns how long it took (it must come back: the bug made it hang)."""
        start = time.monotonic()
        result = self.sf("up", "--detach", "--wait-s", str(wait_s), timeout=wait_s + 60)
        assert result.returncode == 0, result.stdout + result.stderr + self.logs()
        return time.monotonic() - start

    def status(self) -> dict:
        return json.loads(self.sf("status", "--json").stdout)

    def pid_of(self, service: str) -> int:
        return next(s["pid"] for s in self.status()["services"] if s["name"] == service)

    def commands_for(self, resource_id: str) -> list[ControlCommand]:
        return [m for m in messages_until(self.settings, Topics(self.settings).control, self.codec, timeout_s=10)
                if isinstance(m, ControlCommand) and m.resource_id == resource_id]

    def versions(self) -> list[int]:
        return [m.version for m in messages_until(self.settings, Topics(self.settings).weights, self.codec,
                                                  timeout_s=10) if isinstance(m, WeightVersion)]

    def logs(self) -> str:
        return log_tails(self.data_dir)


def wait(condition, timeout_s: float, what: str, every_s: float = 2.0):
    deadline = time.monotonic() + timeout_s
    while not (value := condition()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(every_s)
    return value


def newest_is_train(stack: Stack) -> bool:
    commands = stack.commands_for(FLEXIBLE)
    return bool(commands) and commands[-1].command == "set_active" and commands[-1].role == "train"


def freeze_scheduler_with_flexible_in_train(stack: Stack, timeout_s: float) -> None:
    """SIGSTOP the scheduler at a moment its newest command for the flexible worker is "switch to train"; it
    may have sent another in between, then it runs on and the next switch is tried."""
    deadline = time.monotonic() + timeout_s
    while True:
        wait(lambda: newest_is_train(stack), deadline - time.monotonic(), f"{FLEXIBLE} switched to train", 0.5)
        scheduler = stack.pid_of("scheduler")
        os.kill(scheduler, signal.SIGSTOP)
        time.sleep(1.0)  # what it had sent reaches the topic
        if newest_is_train(stack):
            return
        os.kill(scheduler, signal.SIGCONT)


def trains_past(stack: Stack, version: int, timeout_s: float) -> list[int]:
    return wait(lambda: (v := stack.versions()) and v[-1] > version and v, timeout_s,
                f"a weight version above {version}")


def test_up_again_after_down_in_train_and_after_kill_9_of_everything(tmp_path, vllm_model_dir):
    stack = Stack(tmp_path, vllm_model_dir)
    try:
        first_up = stack.up(wait_s=900)
        trains_past(stack, 0, 600)
        # train until the flexible worker is lent to training, then freeze the scheduler so it stays there
        freeze_scheduler_with_flexible_in_train(stack, 600)
        generation_1 = stack.commands_for(FLEXIBLE)[-1].generation
        before_down = stack.versions()[-1]
        assert stack.sf("down", timeout=300).returncode == 0
        assert stack_processes(stack.data_dir / "run") == []

        second_up = stack.up(wait_s=max(600, 3 * first_up))  # hung for 15 minutes before the fix
        generation_2 = stack.status()["info"]["generation"]
        assert generation_2 != generation_1
        versions = trains_past(stack, before_down, 600)  # serving and training again
        assert versions == sorted(versions), f"versions went backwards: {versions}"  # a restart re-announces its newest

        # a machine reboot: every process of the stack killed at once, supervisor included
        for proc in stack_processes(stack.data_dir / "run"):
            proc.kill()
        supervisor = stack.status()
        assert not supervisor["running"]
        third_up = stack.up(wait_s=max(600, 3 * first_up))
        after_kill = trains_past(stack, stack.versions()[-1], 600)
        assert after_kill == sorted(after_kill), f"versions went backwards: {after_kill}"

        check = stack.sf("replay", "--check", timeout=600)
        assert check.returncode == 0, check.stdout + check.stderr
        print(f"up: first {first_up:.0f} s, after down in train {second_up:.0f} s, after kill -9 {third_up:.0f} s")
    finally:
        stack.sf("down", timeout=300)
    assert stack_processes(stack.data_dir / "run") == []

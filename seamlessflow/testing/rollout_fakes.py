"""A rollout worker without an engine, and commands for it: the worker's command rules tested with no vLLM."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, cast

from seamlessflow.core.control import CommandKind
from seamlessflow.messages import ControlCommand, new_id, now_ms
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.vllm_process import EngineProcess
from seamlessflow.rollout.worker import RolloutWorker


class StoppedEngine:
    """A fake engine that is never running: commands that would need it must not touch it."""

    url, pid = "http://127.0.0.1:9", None

    def running(self) -> bool:
        return False

    def start(self, model_dir: Path) -> None:
        raise AssertionError("the engine must not be started by this command")

    def stop(self, grace_s: float = 20.0) -> None:
        pass


def make_worker(tmp_path: Path, tags: Iterable[str] = ("rollout", "train")) -> RolloutWorker:
    options = RolloutOptions.model_validate({"workers": {"r0": {"capability_tags": list(tags), "active_tag": "train"}}})
    engine = cast(EngineProcess, StoppedEngine())  # stands in for the engine process, duck-typed
    worker = RolloutWorker("r0", options, tmp_path, tmp_path, engine=engine)
    worker.start()  # active tag train: no engine
    return worker


def command(epoch: int, name: str, **fields: Any) -> ControlCommand:
    """A command to worker `r0`; `name` may be a kind the protocol does not know, which the worker must refuse."""
    return ControlCommand(new_id(), "r0", epoch, cast(CommandKind, name), "team", "run", now_ms(), **fields)

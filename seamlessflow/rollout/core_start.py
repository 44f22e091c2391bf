"""How a vLLM-CPU engine starts its engine-core process: a vLLM general plugin that lets it fork.

vLLM's CPU platform always starts the engine core by `spawn` (`CpuPlatform.check_and_update_config` sets
`VLLM_WORKER_MULTIPROC_METHOD=spawn`), so every engine imports torch and vLLM twice: on 2 cores an engine
was ready in 22-27 s on 23-27 CPU-s, against 15-16 s on 16 CPU-s with the core forked from the API server
(the same tiny model, measured side by side). Spawn is there to keep OpenMP worker threads and CUDA out of a
forked child; an API server has started neither when it starts its core, and the lean test engines
(`seamlessflow.testing.vllm_server`) run the model in the core itself. So an engine started with
`SEAMLESSFLOW_ENGINE_CORE_START=fork` in its environment forks its core; without it nothing changes (the
stack's own engines keep vLLM's choice). Loaded by vLLM in every process (entry point in pyproject.toml),
before the platform writes its choice; on any other platform it does nothing.
"""

from __future__ import annotations

import os
from typing import Any

ENV = "SEAMLESSFLOW_ENGINE_CORE_START"
SPAWNING = "_seamlessflow_spawning"  # on the wrapper: the platform's own check it calls first


def register() -> None:
    """With ENV=fork on the CPU platform, the engine core is forked (idempotent: wrapped once per process)."""
    if os.environ.get(ENV) != "fork":
        return
    from vllm.platforms import cpu

    platform = cpu.CpuPlatform
    spawning = vars(platform)["check_and_update_config"].__func__  # the classmethod's function
    if hasattr(spawning, SPAWNING):
        return

    def forking(cls: type, vllm_config: Any) -> None:
        spawning(cls, vllm_config)
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "fork"

    setattr(forking, SPAWNING, spawning)
    platform.check_and_update_config = classmethod(forking)  # type: ignore[method-assign,assignment]

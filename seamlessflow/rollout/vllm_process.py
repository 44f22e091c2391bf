"""One vLLM OpenAI server as a child process: start it bound to its hardware, watch it, stop it.

The engine runs in its own process group, so stopping it also stops vLLM's engine-core and worker
children; SIGTERM first, SIGKILL after a grace period (a stuck engine must not outlive its worker).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import psutil

from seamlessflow.model.lora import engine_args
from seamlessflow.ports import free_port, reachable_host
from seamlessflow.rollout.options import RolloutOptions, WorkerSpec


class EngineStartFailed(RuntimeError):
    pass


def parse_cpus(spec: str) -> set[int]:
    """"0-1,4" -> {0, 1, 4}."""
    cpus: set[int] = set()
    for part in spec.split(","):
        low, _, high = part.strip().partition("-")
        cpus.update(range(int(low), int(high or low) + 1))
    return cpus


@dataclass
class EngineProcess:
    """A vLLM server for `model_dir` on `port`; `url` is what the proxy talks to."""

    options: RolloutOptions
    spec: WorkerSpec
    log_path: Path
    port: int = 0
    proc: subprocess.Popen | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.port = self.port or self.spec.port or free_port()

    @property
    def url(self) -> str:
        return f"http://{reachable_host(self.options.host)}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def argv(self, model_dir: Path) -> list[str]:
        o = self.options
        argv = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", str(model_dir),
                "--served-model-name", o.served_model_name, "--host", o.host, "--port", str(self.port),
                "--dtype", o.dtype, "--seed", str(o.seed), "--logprobs-mode", o.sampling.vllm_logprobs_mode]
        if o.max_model_len is not None:
            argv += ["--max-model-len", str(o.max_model_len)]
        if o.tool_call_parser:
            argv += ["--enable-auto-tool-choice", "--tool-call-parser", o.tool_call_parser]
        if o.optimization_level is not None:
            argv.append(f"-O{o.optimization_level}")
        if o.release_mode == "sleep":
            argv.append("--enable-sleep-mode")
        if o.weight_transfer:
            argv += ["--weight-transfer-config", json.dumps({"backend": o.weight_transfer})]
        if "--enable-lora" not in o.extra_args:  # the user's own LoRA flags win
            argv += engine_args(o.lora_adapters, o.max_loras, o.max_cpu_loras)
        return argv + list(o.extra_args)

    def environment(self) -> dict[str, str]:
        env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "VLLM_CPU_KVCACHE_SPACE": str(self.options.kv_cache_gb)}
        if self.spec.cpus:
            env["VLLM_CPU_OMP_THREADS_BIND"] = self.spec.cpus
        if self.spec.gpu is not None:
            env["CUDA_VISIBLE_DEVICES"] = self.spec.gpu
        if self.options.lora_adapters or "--enable-lora" in self.options.extra_args:
            env["VLLM_ALLOW_RUNTIME_LORA_UPDATING"] = "1"  # /v1/load_lora_adapter: adapters' versions load live
        return {**env, **self.options.env}

    @property
    def pid_path(self) -> Path:
        """Where the running engine's pid and start time are kept (beside its log)."""
        return self.log_path.with_suffix(".pid")

    def start(self, model_dir: Path) -> None:
        """Launch and block until `/health` answers (or the process dies, or the timeout passes)."""
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        reap_leftover(self.pid_path)
        cpus = parse_cpus(self.spec.cpus) if self.spec.cpus else None
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                self.argv(model_dir), env=self.environment(), stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
            )
        remember(self.pid_path, self.proc.pid)
        self.wait_healthy(self.options.health_timeout_s)

    def wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                raise EngineStartFailed(f"vLLM exited with {self.proc.returncode if self.proc else None}; "
                                        f"see {self.log_path}")
            if self.healthy():
                return
            time.sleep(0.5)
        self.stop()
        raise EngineStartFailed(f"vLLM not healthy within {timeout_s:.0f} s; see {self.log_path}")

    def healthy(self, timeout_s: float = 2.0) -> bool:
        try:
            return httpx.get(self.url + "/health", timeout=timeout_s).status_code == 200
        except httpx.HTTPError:
            return False

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, grace_s: float = 20.0) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            _signal_group(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                _signal_group(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        _signal_group(self.proc.pid, signal.SIGKILL)  # leftovers of the group (engine core, workers)
        self.proc = None
        self.pid_path.unlink(missing_ok=True)


def remember(path: Path, pid: int) -> None:
    """Records an engine's pid with its start time, so that a worker started after this one was killed -9
    can stop it (the engine runs in its own session and outlives its worker)."""
    try:
        path.write_text(json.dumps({"pid": pid, "create_time": psutil.Process(pid).create_time()}))
    except psutil.NoSuchProcess:
        pass


def reap_leftover(path: Path) -> bool:
    """Kills the engine a previous worker of this resource left running (its process group), if that very
    process (same pid and start time) still lives; True when one was killed. A leftover holds gigabytes
    and a core, and a restarted worker starts its own engine beside it."""
    try:
        record = json.loads(path.read_text())
        proc = psutil.Process(int(record["pid"]))
        if abs(proc.create_time() - float(record["create_time"])) > 0.01:
            return False
    except (OSError, ValueError, KeyError, TypeError, psutil.NoSuchProcess):
        return False
    finally:
        path.unlink(missing_ok=True)
    _signal_group(proc.pid, signal.SIGKILL)
    try:
        proc.kill()
        proc.wait(10)
    except psutil.Error:
        pass
    return True


def _signal_group(pid: int, sig: int) -> None:
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

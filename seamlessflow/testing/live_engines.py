"""Real vLLM-CPU engines that can join a gloo transfer group, logprobs to compare them with, and a trainer-side
model's next version made by noise."""

from __future__ import annotations

from pathlib import Path

import httpx
import torch

from seamlessflow.rollout.options import RolloutOptions, WorkerSpec
from seamlessflow.rollout.vllm_process import EngineProcess
from seamlessflow.testing.plugin import plugin_env
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV

PROMPT_IDS = [5, 17, 42, 99, 7, 130, 64, 250, 3, 88, 11, 200]


def start_engine(model_dir: Path, work: Path, name: str, backend: str | None = "gloo") -> EngineProcess:
    options = RolloutOptions(model=str(model_dir), max_model_len=256, optimization_level=0, health_timeout_s=540,
                             weight_transfer=backend, extra_args=list(LEAN_ENGINE_ARGS),
                             env={**LEAN_ENGINE_ENV, "VLLM_LOGGING_LEVEL": "WARNING", **plugin_env(work / "plugin")})
    engine = EngineProcess(options, WorkerSpec(), work / f"{name}.log")
    engine.start(model_dir)
    return engine


def engine_logprobs(url: str, ids: list[int] = PROMPT_IDS) -> torch.Tensor:
    """The engine's logprob of each prompt token after the first, given the ones before it."""
    body = {"model": "tiny", "prompt": ids, "max_tokens": 1, "temperature": 0, "prompt_logprobs": 0}
    reply = httpx.post(url + "/v1/completions", json=body, timeout=120).raise_for_status().json()
    entries = reply["choices"][0]["prompt_logprobs"][1:]
    return torch.tensor([entry[str(token)]["logprob"] for entry, token in zip(entries, ids[1:], strict=True)])


def model_logprobs(model: torch.nn.Module, ids: list[int] = PROMPT_IDS) -> torch.Tensor:
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, :-1].float()
    return logits.log_softmax(-1).gather(1, torch.tensor(ids[1:])[:, None])[:, 0]


def next_version(model: torch.nn.Module, seed: int) -> None:
    """Noise added to every weight in place: the trainer's next version, far enough from the last to show."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn(p.shape, generator=generator, dtype=p.dtype))

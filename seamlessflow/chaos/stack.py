"""The stack a chaos run drives: the configured one, or a lighter one on stub engines.

With stub engines (`--stub-engines N`) the rollout workers, scheduler and agent pools are left out: the
proxy routes to N StubEngine processes (`seamlessflow/loadtest/stub_engine.py`, a load-test fake that generates
fixed token ids and no language) and the chaos driver's agents are the only load.
What remains is the data plane the promises are about: proxy, broker(s), assembler and trainer, plus
the engines, all killable. With real engines every configured service is a target.
"""

from __future__ import annotations

import sys
from pathlib import Path

from seamlessflow.config import Settings
from seamlessflow.ports import free_port
from seamlessflow.stack.paths import config_path
from seamlessflow.stack.supervisor import ServiceSpec

STUB_OFF = {"rollout": False, "scheduler": False, "agents": False}


def random_tiny_model(path: Path) -> Path:
    """A random Qwen2 with a 256-id vocabulary, built in a second (stub engines emit ids 100-149): what the
    trainer trains when no model is configured. Random weights: the point is the data plane, not learning."""
    if (path / "config.json").exists():
        return path
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    config = Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,  # type: ignore[call-arg]
                         num_attention_heads=2, num_key_value_heads=1, head_dim=32, max_position_embeddings=512,
                         tie_word_embeddings=True, pad_token_id=0)
    Qwen2ForCausalLM(config).save_pretrained(path)
    return path


def stub_engine_stack(settings: Settings, engines: int, group_size: int) -> tuple[Settings, list[ServiceSpec]]:
    """Settings routing the proxy to `engines` stub engines, and the specs that run them; without a
    configured model the trainer gets `random_tiny_model`."""
    specs, configs = [], []
    for n in range(engines):
        port = free_port()
        specs.append(
            ServiceSpec(
                f"engine-{n}",
                [sys.executable, "-m", "seamlessflow.loadtest.stub_engine", str(port), "0"],
                {"PYTHONUNBUFFERED": "1"},
            )
        )
        configs.append({"id": f"engine-{n}", "url": f"http://127.0.0.1:{port}"})
    if not settings.section("rollout").get("model"):
        model = random_tiny_model(Path(settings.data_dir).resolve() / "models" / "random-256")
        settings = settings.with_overrides(rollout={"model": str(model)}, trainer={"model_path": str(model)})
    settings = settings.with_overrides(
        services=STUB_OFF, proxy={"engines": configs, "discover_engines": False, "listen_control": False},
        trainer={"group_size": group_size})
    return settings, specs


def reward_worker_specs(settings: Settings, references: list[str]) -> list[ServiceSpec]:
    """Supervised reward workers, one per `MODULE:FUNCTION@POOL` (`seamlessflow reward run`): `up` starts
    none (pools are run where their verifiers live), so a chaos run that kills one starts its own."""
    specs = []
    for reference in references:
        function, _, pool = reference.partition("@")
        pool = pool or function.rpartition(":")[2]
        argv = [sys.executable, "-m", "seamlessflow", "--config", str(config_path(settings)), "reward", "run",
                function, "--pool", pool]
        specs.append(ServiceSpec(f"reward-{pool}", argv, {"PYTHONUNBUFFERED": "1"}))
    return specs

"""LoRA adapters on the shared base model: how one is named to the engines, and a fresh one written as PEFT would.

vLLM serves the base and every team's adapter at once when started with `--enable-lora --max-loras N
--max-lora-rank R --lora-modules name=path ...` (`engine_args`). The proxy names a team's adapter
(`proxy.teams.<team>.lora`) and the rollout workers start their engines with it, so both meet here.

An adapter is a PEFT directory: `adapter_config.json` (rank, alpha, target modules) and
`adapter_model.safetensors` with one `lora_A` ([rank, in]) and one `lora_B` ([out, rank]) per adapted module,
named `base_model.model.<module>.lora_A.weight`. `write_adapter` starts it as PEFT's `LoraConfig` does
(A kaiming-uniform, B zero: the adapter changes nothing until trained); shapes come from the base's
safetensors headers, so no weight is loaded.

Cheap to import (no torch): torch and safetensors load when an adapter is written.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

if TYPE_CHECKING:
    import torch

    from seamlessflow.config import Settings

# vLLM's accepted --max-lora-rank values (vllm.config.lora.MaxLoRARanks)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
DEFAULT_TARGETS = ("q_proj", "v_proj")  # PEFT's default for Llama/Qwen-style models
WEIGHTS_FILE, CONFIG_FILE = "adapter_model.safetensors", "adapter_config.json"
ADAPTER_FORMAT = "peft-lora"  # a `WeightVersion` of an adapter: its uri names a PEFT directory (adapter tensors only)
VERSION_FIGURE = "adapter_version:"  # a rollout worker's heartbeat figure: `adapter_version:<name>` -> its version


class TeamAdapter(BaseModel):
    """A team's LoRA adapter on the shared base model: the engines serve it beside the base (vLLM's multi-LoRA), and
    the proxy sends the team's calls to it. Adapters ride a frozen base: a stack trains the base or adapters."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    name: str = Field(min_length=1)
    """The name the engines serve it under (`--lora-modules <name>=<path>`): the team's calls' upstream `model`."""
    path: str
    """Its PEFT directory (adapter_config.json, adapter_model.safetensors), as the engines read it."""
    rank: int = Field(ge=1, le=512)
    """Its LoRA rank; the engines' `--max-lora-rank` must be at least the largest team's."""


def engine_args(adapters: Iterable[TeamAdapter], max_loras: int | None = None,
                max_cpu_loras: int | None = None) -> list[str]:
    """The vLLM arguments that serve every adapter (one per name) beside the base; [] for none. `--max-lora-rank`
    is the largest rank rounded up to one vLLM accepts.

    Room: an engine reserves device memory for `--max-loras` adapters at the largest rank (the adapters one batch
    can mix), default one per team; with many teams, fewer slots than teams keep that reserve small, and
    `--max-cpu-loras` (default: the slots) bounds the adapters kept in host memory. An adapter evicted from either
    is loaded again from its path by its next call (vLLM's LRU caches): that call is slower, never refused."""
    unique = list({a.name: a for a in adapters}.values())
    if not unique:
        return []
    rank = next(r for r in VLLM_LORA_RANKS if r >= max(a.rank for a in unique))
    slots = min(max_loras or len(unique), len(unique))
    room = ["--max-cpu-loras", str(max(max_cpu_loras, slots))] if max_cpu_loras else []
    return ["--enable-lora", "--max-loras", str(slots), *room, "--max-lora-rank", str(rank),
            "--lora-modules", *(f"{a.name}={a.path}" for a in unique)]


def adapters_in(teams: Mapping[str, object]) -> dict[str, dict]:
    """Team -> its `lora` entry as written, of a `proxy.teams` section (team -> entry); teams without one left out."""
    return {team: entry["lora"] for team, entry in teams.items() if isinstance(entry, Mapping) and entry.get("lora")}


def version_figures(versions: Mapping[str, int]) -> dict[str, float]:
    """The versions of the adapters an engine holds, as figures of its worker's heartbeat (`ResourceStatus`)."""
    return {f"{VERSION_FIGURE}{name}": float(version) for name, version in versions.items()}


def versions_in(figures: Mapping[str, float]) -> dict[str, int]:
    """The adapter versions a heartbeat's figures carry (`version_figures`); {} for a sender without adapters."""
    return {key.removeprefix(VERSION_FIGURE): int(value) for key, value in figures.items()
            if key.startswith(VERSION_FIGURE) and len(key) > len(VERSION_FIGURE)}


def team_adapters(settings: Settings) -> dict[str, TeamAdapter]:
    """Team -> its adapter (`proxy.teams.<team>.lora`), in config order; read without the proxy's package (its
    server), as `ProxyOptions.teams` reads it."""
    entries = adapters_in(settings.section("proxy").get("teams") or {})
    return {team: TeamAdapter.model_validate(lora) for team, lora in entries.items()}


def module_shapes(model_dir: Path, target_modules: Iterable[str]) -> dict[str, tuple[int, int]]:
    """Every linear module of the base whose last name is a target -> (out_features, in_features), read from the
    headers of its safetensors files (one file or shards)."""
    from safetensors import safe_open

    targets = set(target_modules)
    files = sorted(Path(model_dir).glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors weights in {model_dir}")
    shapes: dict[str, tuple[int, int]] = {}
    for file in files:
        with safe_open(str(file), framework="pt") as weights:
            for name in weights.keys():  # noqa: SIM118 (safe_open is no mapping)
                module = name.removesuffix(".weight")
                if name.endswith(".weight") and module.rsplit(".", 1)[-1] in targets:
                    shape = weights.get_slice(name).get_shape()
                    if len(shape) == 2:
                        shapes[module] = (int(shape[0]), int(shape[1]))
    missing = targets - {m.rsplit(".", 1)[-1] for m in shapes}
    if missing:
        raise ValueError(f"the model in {model_dir} has no linear module named {', '.join(sorted(missing))}")
    return dict(sorted(shapes.items()))


def peft_initial(shapes: Mapping[str, tuple[int, int]], rank: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """PEFT's starting tensors: lora_A kaiming-uniform (a=sqrt(5): uniform in +-1/sqrt(in_features)), lora_B zero."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for module, (out_features, in_features) in shapes.items():
        bound = 1 / math.sqrt(in_features)
        a = torch.rand(rank, in_features, generator=generator) * 2 * bound - bound
        tensors[f"base_model.model.{module}.lora_A.weight"] = a
        tensors[f"base_model.model.{module}.lora_B.weight"] = torch.zeros(out_features, rank)
    return tensors


def save_adapter(out: Path, tensors: Mapping[str, torch.Tensor], rank: int, alpha: float,
                 target_modules: Iterable[str], base: Path | str) -> Path:
    """Writes the PEFT directory `out` (its config and its tensors); returns it."""
    from safetensors.torch import save_file

    out.mkdir(parents=True, exist_ok=True)
    save_file(dict(tensors), str(out / WEIGHTS_FILE), metadata={"format": "pt"})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": alpha,
              "target_modules": list(target_modules), "lora_dropout": 0.0, "bias": "none",
              "fan_in_fan_out": False, "use_rslora": False, "use_dora": False, "modules_to_save": None,
              "init_lora_weights": True, "inference_mode": True, "base_model_name_or_path": str(base)}
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n")
    return out


def write_adapter(model_dir: Path, out: Path, rank: int, alpha: float | None = None,
                  target_modules: Iterable[str] = DEFAULT_TARGETS, seed: int = 0) -> Path:
    """A fresh adapter of `rank` on every layer's `target_modules` of the base in `model_dir`, equal to the base
    until trained; alpha defaults to 2 * rank."""
    targets = tuple(target_modules)
    tensors = peft_initial(module_shapes(model_dir, targets), rank, seed)
    return save_adapter(out, tensors, rank, 2 * rank if alpha is None else alpha, targets, model_dir)

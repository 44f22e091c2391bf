"""A team's LoRA adapter trained on the frozen shared base: one trainer process per adapter team.

Why a frozen base: every team's adapter rides the same base weights in the engines (vLLM's multi-LoRA), so no
trainer may move them. The base is loaded as for full training (`load_causal_lm`), PEFT's layers are injected
into it under the adapter's name, every parameter but the adapter's has `requires_grad` off, and only the
adapter's go to DeepSpeed (`adapter_parameters`), so no optimizer ever holds a base weight.

Keys: a PEFT directory names a tensor `base_model.model.<module>.lora_A.weight`; the injected parameter is
`<module>.lora_A.<adapter>.weight` (the same in the HF model and in `TokenLogprobModel`, which keeps HF's names).
`peft_key`/`parameter_name` map one to the other, both ways, so the team's initial tensors load and every
version is written with the keys the engines read.

The KL reference of a LoRA policy is its frozen base: the same module with the adapter switched off
(`AdapterOff`), so no second copy of the model is loaded.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from peft import LoraConfig, inject_adapter_in_model
from peft.tuners.tuners_utils import BaseTunerLayer
from safetensors.torch import load_file

from seamlessflow.model.lora import CONFIG_FILE, WEIGHTS_FILE, TeamAdapter, save_adapter
from seamlessflow.weights.files import version_dir

PEFT_PREFIX = "base_model.model."
PARTS = ("lora_A", "lora_B")


@dataclass(frozen=True)
class AdapterSpec:
    """A team's adapter as its PEFT directory describes it: what to inject and what each version's config says."""

    name: str
    path: Path
    rank: int
    alpha: float
    targets: tuple[str, ...]
    dropout: float

    @classmethod
    def of(cls, entry: TeamAdapter) -> AdapterSpec:
        """Read from the entry's `adapter_config.json`; only what `save_adapter` writes back is accepted, so a
        version never silently differs from the adapter the engines were started with."""
        config: dict[str, Any] = json.loads((Path(entry.path) / CONFIG_FILE).read_text())
        targets = config.get("target_modules")
        if not isinstance(targets, list) or not targets:
            raise ValueError(f"{entry.path}: target_modules must be a list of module names, not {targets!r}")
        unsupported = {k: config.get(k) for k in ("use_dora", "use_rslora", "modules_to_save") if config.get(k)}
        if config.get("bias", "none") != "none":
            unsupported["bias"] = config["bias"]
        if unsupported:
            raise ValueError(f"{entry.path}: adapter options not trained here: {unsupported}")
        if int(config["r"]) != entry.rank:
            raise ValueError(f"{entry.path}: r={config['r']} but proxy.teams lora rank is {entry.rank}")
        return cls(entry.name, Path(entry.path), entry.rank, float(config.get("lora_alpha", 8)), tuple(targets),
                   float(config.get("lora_dropout", 0.0)))


def peft_key(parameter: str, adapter: str) -> str:
    """`<module>.lora_A.<adapter>.weight` -> `base_model.model.<module>.lora_A.weight`."""
    for part in PARTS:
        parameter = parameter.replace(f".{part}.{adapter}.", f".{part}.")
    return PEFT_PREFIX + parameter


def parameter_name(key: str, adapter: str) -> str:
    """`base_model.model.<module>.lora_A.weight` -> `<module>.lora_A.<adapter>.weight`."""
    name = key.removeprefix(PEFT_PREFIX)
    for part in PARTS:
        name = name.replace(f".{part}.weight", f".{part}.{adapter}.weight")
    return name


def adapter_parameters(module: torch.nn.Module, adapter: str) -> dict[str, torch.nn.Parameter]:
    """The adapter's parameters by name: the only ones trained."""
    return {name: p for name, p in module.named_parameters()
            if any(f".{part}.{adapter}." in name for part in PARTS)}


def attach_adapter(model: torch.nn.Module, spec: AdapterSpec) -> torch.nn.Module:
    """Injects the adapter into ``model`` (in place), loads the team's tensors, freezes everything else."""
    # PEFT types lora_alpha as int but only divides by it (scaling = alpha / r); a team's alpha may be 1.5 x rank
    config = LoraConfig(r=spec.rank, lora_alpha=spec.alpha,  # type: ignore[arg-type]
                        target_modules=list(spec.targets), lora_dropout=spec.dropout)
    inject_adapter_in_model(config, model, adapter_name=spec.name)
    trained = adapter_parameters(model, spec.name)
    tensors = {parameter_name(k, spec.name): v for k, v in load_file(str(spec.path / WEIGHTS_FILE)).items()}
    missing, unexpected = sorted(set(trained) - set(tensors)), sorted(set(tensors) - set(trained))
    if missing or unexpected:
        raise ValueError(f"{spec.path / WEIGHTS_FILE} does not fit the injected adapter: missing "
                         f"{missing[:3]}, unexpected {unexpected[:3]}")
    with torch.no_grad():
        for name, param in trained.items():
            param.copy_(tensors[name].to(param.dtype))
    for name, param in model.named_parameters():
        param.requires_grad_(name in trained)
    return model


def adapter_tensors(module: torch.nn.Module, adapter: str) -> dict[str, torch.Tensor]:
    """The adapter's tensors under PEFT's keys (a version's content; not yet a host copy)."""
    return {peft_key(name, adapter): p.detach() for name, p in adapter_parameters(module, adapter).items()}


def load_adapter_state(src: dict[str, torch.Tensor], dst: torch.nn.Module) -> None:
    """DeepSpeed's `custom_load_fn` for checkpoints saved with `exclude_frozen_parameters`: every trained
    parameter must be there (none falls back to its start value), and only those are loaded. Frozen entries that
    slip through (a tied head, which DeepSpeed drops only under its parameter name) are the base's: ignored."""
    trained = {name for name, p in dst.named_parameters() if p.requires_grad}
    unknown = set(src) - set(dst.state_dict())
    if trained - set(src) or unknown:
        raise ValueError(f"checkpoint does not fit the adapter: missing {sorted(trained - set(src))[:3]}, "
                         f"unexpected {sorted(unknown)[:3]}")
    dst.load_state_dict({name: src[name] for name in trained}, strict=False)


def save_adapter_version(spec: AdapterSpec, root: Path, version: int, base: str | Path,
                         tensors: dict[str, torch.Tensor], incarnation: str = "") -> Path:
    """Version ``version`` as a PEFT directory, written under a temporary name and renamed (`save_weights`'s
    arguments, the adapter in place of the module)."""
    final = version_dir(root, version, incarnation)
    staging = final.with_name(final.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    save_adapter(staging, tensors, spec.rank, spec.alpha, spec.targets, base)
    if final.exists():  # a replay after a crash re-creates the same version
        shutil.rmtree(final)
    staging.rename(final)
    return final


class AdapterOff(torch.nn.Module):
    """The policy with its adapter switched off, in eval mode: the frozen base, the KL reference of a LoRA policy.
    Holds the policy without registering it (its parameters stay the engine's only)."""

    def __init__(self, policy: torch.nn.Module):
        super().__init__()
        self.__dict__["policy"] = policy
        self.__dict__["layers"] = [m for m in policy.modules() if isinstance(m, BaseTunerLayer)]

    def forward(self, *args: Any, **kwargs: Any) -> torch.Tensor:
        policy: torch.nn.Module = self.__dict__["policy"]
        was_training = policy.training
        policy.eval()
        for layer in self.__dict__["layers"]:
            layer._disable_adapters = True  # the flag alone: `enable_adapters` would also flip requires_grad
        try:
            return policy(*args, **kwargs)
        finally:
            for layer in self.__dict__["layers"]:
                layer._disable_adapters = False
            policy.train(was_training)

"""A LoRA adapter written by hand for the tiny random model: what `peft` would save, without needing `peft`.

vLLM reads an adapter directory as PEFT writes it: `adapter_config.json` (rank, alpha, target modules) and
`adapter_model.safetensors` with one `lora_A` ([rank, in]) and one `lora_B` ([out, rank]) per adapted
module, named `base_model.model.<module>.lora_A.weight`. PEFT starts `lora_B` at zero (an adapter that
changes nothing); these start random, so a served adapter visibly moves the model's logprobs.
"""

from __future__ import annotations

import json
from pathlib import Path

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def write_random_adapter(model_dir: Path, out: Path, rank: int, seed: int = 0, scale: float = 0.5,
                         target_modules: tuple[str, ...] = ATTENTION) -> Path:
    """An adapter of `rank` on every layer's `target_modules`, shapes read from the base model's weights."""
    import torch
    from safetensors.torch import load_file, save_file

    base = load_file(str(model_dir / "model.safetensors"))
    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for name, weight in base.items():
        module = name.removesuffix(".weight")
        if not name.endswith(".weight") or module.rsplit(".", 1)[-1] not in target_modules:
            continue
        out_features, in_features = weight.shape
        prefix = f"base_model.model.{module}"
        tensors[f"{prefix}.lora_A.weight"] = scale * torch.randn(rank, in_features, generator=generator)
        tensors[f"{prefix}.lora_B.weight"] = scale * torch.randn(out_features, rank, generator=generator)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "adapter_model.safetensors"), metadata={"format": "pt"})
    config = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": rank, "lora_alpha": rank,
              "target_modules": list(target_modules), "lora_dropout": 0.0, "bias": "none",
              "base_model_name_or_path": str(model_dir)}
    (out / "adapter_config.json").write_text(json.dumps(config, indent=2))
    return out

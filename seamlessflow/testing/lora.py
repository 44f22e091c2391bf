"""A LoRA adapter for the tiny random model whose B is not zero, so a served adapter visibly moves the logprobs.

A fresh adapter (`seamlessflow.model.lora.write_adapter`, as PEFT starts one) equals the base until trained;
the engine tests need one that differs at once. Same PEFT directory, random A and B.
"""

from __future__ import annotations

from pathlib import Path

from seamlessflow.model.lora import module_shapes, save_adapter

ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj")


def write_random_adapter(model_dir: Path, out: Path, rank: int, seed: int = 0, scale: float = 0.5,
                         target_modules: tuple[str, ...] = ATTENTION) -> Path:
    """An adapter of `rank` on every layer's `target_modules` (alpha = rank), shapes read from the base's weights."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    tensors = {}
    for module, (out_features, in_features) in module_shapes(model_dir, target_modules).items():
        prefix = f"base_model.model.{module}"
        tensors[f"{prefix}.lora_A.weight"] = scale * torch.randn(rank, in_features, generator=generator)
        tensors[f"{prefix}.lora_B.weight"] = scale * torch.randn(out_features, rank, generator=generator)
    return save_adapter(out, tensors, rank, rank, target_modules, model_dir)

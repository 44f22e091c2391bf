"""A new weight version without a trainer: the tiny model's weights with noise added (tests, benchmarks)."""

from __future__ import annotations

import shutil
from pathlib import Path


def write_new_version(model_dir: Path, out: Path, scale: float = 0.5, seed: int = 1) -> Path:
    """What a trainer does: the same HF directory with changed weights (here: noise added by torch)."""
    import torch
    from safetensors.torch import load_file, save_file

    shutil.copytree(model_dir, out)
    weights = load_file(str(model_dir / "model.safetensors"))
    generator = torch.Generator().manual_seed(seed)
    changed = {k: v + scale * torch.randn(v.shape, generator=generator, dtype=v.dtype) for k, v in weights.items()}
    save_file(changed, str(out / "model.safetensors"), metadata={"format": "pt"})
    return out

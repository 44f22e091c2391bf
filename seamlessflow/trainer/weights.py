"""Policy weights as HF directories (safetensors) that rollout engines load, one directory per version.

A version directory is written under a temporary name and renamed, so an engine never sees half a save.
Tokenizer and generation files are copied from the base model so the directory is complete on its own.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import torch

COMPANION_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "chat_template.jinja", "generation_config.json",
)


def version_dir(root: Path, version: int) -> Path:
    return Path(root) / f"v{version:06d}"


def save_weights(
    module: torch.nn.Module,
    root: Path,
    version: int,
    base_model_path: str | Path,
    state_dict: dict[str, torch.Tensor] | None = None,
) -> Path:
    """Writes version ``version`` of ``module`` (or of ``state_dict``) and returns its directory."""
    final = version_dir(root, version)
    staging = final.with_name(final.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    module.save_pretrained(staging, state_dict=state_dict, safe_serialization=True)  # type: ignore[operator]  # a PreTrainedModel
    for name in COMPANION_FILES:
        source = Path(base_model_path) / name
        if source.exists() and not (staging / name).exists():
            shutil.copy2(source, staging / name)
    if final.exists():  # a replay after a crash re-creates the same version
        shutil.rmtree(final)
    staging.rename(final)
    return final


def latest_version(root: Path) -> int:
    """The newest complete version directory under ``root`` (0 if none)."""
    names = [p.name for p in Path(root).glob("v[0-9]*") if not p.name.endswith(".tmp")]
    return max((int(name[1:]) for name in names if name[1:].isdigit()), default=0)


def prune_versions(root: Path, keep: int, protect: int) -> None:
    """Deletes all but the newest ``keep`` version directories (never ``protect``)."""
    versions = sorted(p for p in Path(root).glob("v[0-9]*") if not p.name.endswith(".tmp"))
    for old in versions[:-keep] if keep > 0 else []:
        if old != version_dir(root, protect):
            shutil.rmtree(old, ignore_errors=True)

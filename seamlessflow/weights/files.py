"""Version directories (HF safetensors that rollout engines load) and the background writer that saves them.

A version directory is written under a temporary name and renamed, so an engine never sees half a save.
Tokenizer and generation files are copied from the base model so the directory is complete on its own.

Publishing a version used to write the safetensors directory inside the step (on a lent H100, 1.3 s for a
0.5 B model, 27 s for 7.6 B): the optimizer waited for the disk. Now the step only takes a host snapshot
of the weights (`seamlessflow.weights.snapshot`; under ZeRO-3 the gather that consolidates them is a
collective and stays on the critical path) and a single background thread writes it. The bound is one write
in flight: a new snapshot first waits for the previous write, so host memory holds at most one extra copy
of the weights and a disk slower than `publish_every` steps shows up as waiting, measured and reported,
never as a queue.

A version is announced (WeightVersion) only after its directory is complete, by the loop's thread, in
version order; a checkpoint drains the writer first, so the version a checkpoint names is always on disk.

A trainer process writes its versions under names of its own (`v000012-<incarnation>`): one fenced by a
newer trainer (seamlessflow.kafka.fencing) may still finish a write it had begun, but beside the newer
one's directory, never over it; engines load what the committed WeightVersion record names.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import torch

COMPANION_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "chat_template.jinja", "generation_config.json",
)


def version_dir(root: Path, version: int, incarnation: str = "") -> Path:
    """`v000012`, or `v000012-<incarnation>` for a trainer process's own (see the module)."""
    return Path(root) / (f"v{version:06d}-{incarnation}" if incarnation else f"v{version:06d}")


def version_of(name: str) -> int | None:
    """The version a directory name holds (`v000012`, `v000012-ab12cd`), None for anything else (a `.tmp`)."""
    digits, rest = name[1:7], name[7:]
    ours = name[:1] == "v" and len(digits) == 6 and digits.isdigit() and rest[:1] in ("", "-") and "." not in rest
    return int(digits) if ours else None


def save_weights(
    module: torch.nn.Module,
    root: Path,
    version: int,
    base_model_path: str | Path,
    state_dict: dict[str, torch.Tensor] | None = None,
    incarnation: str = "",
) -> Path:
    """Writes version ``version`` of ``module`` (or of ``state_dict``) and returns its directory."""
    final = version_dir(root, version, incarnation)
    staging = final.with_name(final.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    save_pretrained = module.save_pretrained  # a PreTrainedModel's
    save_pretrained(staging, state_dict=state_dict, safe_serialization=True)  # type: ignore[operator]
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
    versions = [version_of(p.name) for p in Path(root).glob("v[0-9]*")]
    return max((v for v in versions if v is not None), default=0)


def prune_versions(root: Path, keep: int, protect: int, incarnation: str = "") -> None:
    """Deletes all but the newest ``keep`` version directories (never ``protect``, written by ``incarnation``)."""
    versions = sorted(p for p in Path(root).glob("v[0-9]*") if version_of(p.name) is not None)
    for old in versions[:-keep] if keep > 0 else []:
        if old != version_dir(root, protect, incarnation):
            shutil.rmtree(old, ignore_errors=True)


@dataclass
class PendingVersion:
    version: int
    step: int
    written: Future[Path]


class WeightWriter:
    """One background writer thread with at most one version in flight."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="weights-writer")
        self._pending: list[PendingVersion] = []

    def submit(self, version: int, step: int, write: Callable[[], Path]) -> float:
        """Queues ``write`` for ``version``; returns the seconds spent waiting for the previous write."""
        started = time.perf_counter()
        for pending in self._pending:
            pending.written.result()
        waited = time.perf_counter() - started
        self._pending.append(PendingVersion(version, step, self._pool.submit(write)))
        return waited

    def written(self) -> list[PendingVersion]:
        """The versions whose directories are complete, oldest first, and no longer pending; a failed
        write raises here (on the loop's thread), so the trainer stops rather than skipping a version."""
        done = []
        while self._pending and self._pending[0].written.done():
            pending = self._pending.pop(0)
            pending.written.result()
            done.append(pending)
        return done

    def drain(self) -> list[PendingVersion]:
        """Waits for every write, then returns them as `written` does."""
        for pending in self._pending:
            pending.written.result()
        return self.written()

    def close(self) -> None:
        self._pool.shutdown(wait=True)

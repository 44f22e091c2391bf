"""The run's model: which one the engines serve and the trainer trains (`choice`), and the tiny local model,
built from scratch on the machine and served like any HF model (`build`, `spec`).

Importing the package (or `choice`) imports no torch: the build's names load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from seamlessflow.model.spec import FULL, SMALL, TinyModelSpec

if TYPE_CHECKING:
    from seamlessflow.model.build import BuildResult, build_tiny_model

__all__ = ["FULL", "SMALL", "BuildResult", "TinyModelSpec", "build_tiny_model"]
_BUILD_NAMES = ("BuildResult", "build_tiny_model")  # they import torch and transformers


def __getattr__(name: str) -> Any:
    if name in _BUILD_NAMES:
        from seamlessflow.model import build

        return getattr(build, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

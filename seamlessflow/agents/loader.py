"""Finding the user's agent function from a `module:function` reference (or a file path)."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from pathlib import Path


def load_agent(reference: str) -> Callable:
    """`pkg.module:fn` or `path/to/file.py:fn` -> the function."""
    module_ref, sep, name = reference.rpartition(":")
    if not sep or not module_ref or not name:
        raise ValueError(f"expected MODULE:FUNCTION, got {reference!r}")
    if module_ref.endswith(".py"):
        path = Path(module_ref).resolve()
        spec = importlib.util.spec_from_file_location(path.stem, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules.setdefault(path.stem, module)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(module_ref)
    fn = getattr(module, name, None)
    if not callable(fn):
        raise ValueError(f"{module_ref} has no callable {name!r}")
    return fn

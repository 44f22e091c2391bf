"""The user's functions (agents, verifiers): found from a `module:function` reference (or a file path), and
what they return read as a reward.

Why a module of its own, below `agents` and `rewards`: agent workers, reward workers and the evaluation all
call user functions this way; kept in `agents`, it made `rewards` import the agent package, which imports
the reward request back.
"""

from __future__ import annotations

import importlib
import importlib.util
import math
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any


def load_function(reference: str) -> Callable:
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


def parse_result(value: Any) -> tuple[float, dict]:
    """An agent's return value -> (reward, info); raises TypeError/ValueError on anything else."""
    info: dict = {}
    if isinstance(value, tuple):
        if len(value) != 2 or not isinstance(value[1], dict):
            raise TypeError(f"an agent returns a reward or (reward, info_dict), got {value!r}")
        value, info = value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"an agent returns a numeric reward, got {type(value).__name__}")
    reward = float(value)
    if not math.isfinite(reward):
        raise ValueError(f"reward must be finite, got {reward}")
    return reward, info

"""Lets vLLM processes started from a checkout find the project's weight-transfer plugin (tests, benchmarks)."""

from __future__ import annotations

import os
from importlib.metadata import entry_points
from pathlib import Path

PLUGIN = "seamlessflow.weights.plugin:register"
PLUGINS = {"seamlessflow_weight_transfer": PLUGIN,
           "seamlessflow_engine_core_start": "seamlessflow.rollout.core_start:register"}  # as in pyproject.toml


def plugin_env(where: Path) -> dict[str, str]:
    """Environment that lets vLLM processes find the plugin. The entry point lives in pyproject.toml; an
    editable install made before it was added (or before it moved to `seamlessflow.weights`) has no such
    entry, so a minimal package record with it is put on PYTHONPATH instead (importlib.metadata reads
    `*.dist-info` from every path entry; vLLM logs the stale entry's import error and goes on)."""
    if set(PLUGINS.values()) <= {ep.value for ep in entry_points(group="vllm.general_plugins")}:
        return {}
    record = where / "seamlessflow_weight_transfer_plugin-0.dist-info"
    record.mkdir(parents=True, exist_ok=True)
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: seamlessflow-weight-transfer-plugin\nVersion: 0\n")
    lines = "".join(f"{name} = {value}\n" for name, value in PLUGINS.items())
    (record / "entry_points.txt").write_text(f"[vllm.general_plugins]\n{lines}")
    root = str(Path(__file__).resolve().parents[2])  # the checkout holding seamlessflow/
    return {"PYTHONPATH": os.pathsep.join(p for p in (str(where), root, os.environ.get("PYTHONPATH", "")) if p)}

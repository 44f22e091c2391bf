"""What the default model's long window costs: the old default (a 384-token vocabulary, a 512-token window)
beside the new one (a 16k subword vocabulary, a 32k window), each engine started as `up` starts it.

Side by side in one run, per model:
  start            seconds from the engine's launch to /health answering (vLLM's own start, as `up` runs it)
  rss              the engine processes' resident memory once ready (MiB)
  kv/token         the KV cache a token takes (layers x kv heads x head dim x K and V x 4 bytes, float32)
  kv blocks        the KV cache vLLM sized (its log's "KV cache size" line, in tokens), within kv_cache_gb
  ttft N           time to the first streamed token of a prompt of N token ids (`/v1/completions`, one token
                   asked, the prefix cache reset before each run so every prompt is computed whole); the
                   median of --repeats runs
A prompt past a window is not run (the 512-token model takes none of 1k/8k/32k).

    .venv/bin/python benchmarks/bench_context_window.py [--repeats 3] [--data-dir .seamlessflow]

The models are built (or reused) as `seamlessflow model init` builds them: the new one in <data-dir>/models/tiny,
the old one beside it in <data-dir>/models/tiny-512 (the same spec with the old vocabulary and window).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import httpx
import psutil

from seamlessflow.model import FULL, build_tiny_model
from seamlessflow.rollout.options import RolloutOptions, WorkerSpec
from seamlessflow.rollout.vllm_process import EngineProcess

OLD = dataclasses.replace(FULL, vocab_size=384, max_position_embeddings=1024, english_text=False, copy_fraction=0.0)
PROMPTS = (400, 1024, 8192, 32000)  # token ids; 400 fits the old window too


def engine_rss_mib(pid: int) -> float:
    root = psutil.Process(pid)
    return sum(p.memory_info().rss for p in [root, *root.children(recursive=True)]) / 2**20


def kv_tokens(log: Path) -> int | None:
    found = re.findall(r"KV cache size: ([\d,]+) tokens", log.read_text(errors="replace"))
    return int(found[-1].replace(",", "")) if found else None


def kv_bytes_per_token(model_dir: Path) -> int:
    config = json.loads((model_dir / "config.json").read_text())
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return config["num_hidden_layers"] * config["num_key_value_heads"] * head_dim * 2 * 4


def first_token_s(url: str, prompt_len: int, vocab: int, seed: int) -> float:
    ids = [(seed * 7919 + i * 31) % (vocab - 8) + 3 for i in range(prompt_len)]  # no special tokens
    httpx.post(url + "/reset_prefix_cache", timeout=30)
    started = time.perf_counter()
    body = {"model": "tiny", "prompt": ids, "max_tokens": 1, "temperature": 0, "stream": True}
    with httpx.stream("POST", url + "/v1/completions", json=body, timeout=600) as response:
        response.raise_for_status()
        for line in response.iter_lines():
            if line.startswith("data: ") and line != "data: [DONE]":
                return time.perf_counter() - started
    raise RuntimeError("no token streamed")


def measure(name: str, model_dir: Path, window: int, repeats: int, logs: Path) -> dict:
    vocab = json.loads((model_dir / "config.json").read_text())["vocab_size"]
    engine = EngineProcess(RolloutOptions(model=str(model_dir), max_model_len=window), WorkerSpec(), logs / name)
    started = time.perf_counter()
    engine.start(model_dir)
    try:
        engine.wait_healthy(900)
        row: dict = {"model": name, "window": window, "start_s": time.perf_counter() - started}
        row["rss_mib"] = engine_rss_mib(engine.pid or 0)
        row["kv_bytes_per_token"] = kv_bytes_per_token(model_dir)
        row["kv_tokens"] = kv_tokens(logs / name)
        first_token_s(engine.url, 16, vocab, 0)  # warm-up
        for n in PROMPTS:
            if n < window:
                row[f"ttft_{n}"] = statistics.median(first_token_s(engine.url, n, vocab, r) for r in range(repeats))
        return row
    finally:
        engine.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--data-dir", type=Path, default=Path(".seamlessflow"))
    args = parser.parse_args()
    models = args.data_dir / "models"
    new = build_tiny_model(models / "tiny", spec=FULL).path
    old = build_tiny_model(models / "tiny-512", spec=OLD).path
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure("old: 384 vocab", old, 512, args.repeats, Path(tmp)),
                measure("new: 16k vocab", new, FULL.max_position_embeddings, args.repeats, Path(tmp))]
    columns = ["model", "window", "start_s", "rss_mib", "kv_bytes_per_token", "kv_tokens",
               *(f"ttft_{n}" for n in PROMPTS)]
    print(" | ".join(columns))
    for row in rows:
        print(" | ".join(_cell(row.get(c)) for c in columns))
    print(f"new/old engine start: {rows[1]['start_s'] / rows[0]['start_s']:.2f}, "
          f"rss: {rows[1]['rss_mib'] / rows[0]['rss_mib']:.2f}, "
          f"ttft at 400 tokens: {rows[1]['ttft_400'] / rows[0]['ttft_400']:.2f}")


def _cell(value: object) -> str:
    if value is None:
        return "-"
    return f"{value:.3f}" if isinstance(value, float) else str(value)


if __name__ == "__main__":
    main()

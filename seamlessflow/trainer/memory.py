"""How a trainer step is cut up and what it keeps for the backward: a plain view, apart from the engine so the
options class can build it without importing DeepSpeed, and the engine and its options import each other
nowhere."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MemoryConfig:
    """How a step is cut up and what is kept for the backward: the `trainer:` settings of the same names, as
    `TrainerOptions.memory_config()` builds this view (the defaults are written there, once).

    ``max_tokens_per_micro_batch``: token positions per forward/backward (padding included when not
    packed); None keeps DeepSpeed's `train_micro_batch_size_per_gpu` sequences per micro-batch.
    ``packing``: sequences end to end in one row, when the model confines attention to each (checked at
    start); otherwise rows padded to their length-sorted neighbours. None (auto) packs only with varlen
    attention (`attn_implementation` flash_attention_2/3), whose work is the sum of each sequence's
    length squared; True packs with any attention, and sdpa/eager then attend through a block-diagonal
    mask over the whole row: the same numbers, but attention work and mask memory grow with the row's
    length squared. ``attn_implementation``:
    passed to transformers (None: its default, sdpa). ``logprob_chunk_tokens``: positions
    per chunk of LM head + log-softmax (`core.losses.token_logprobs`). ``activation_checkpointing``:
    recompute each decoder layer in the backward (HF gradient checkpointing). ``offload_reference``: the
    KL reference model (loaded only when `kl_coef` > 0) keeps its weights in host memory and streams them
    layer by layer (a ZeRO-3 inference engine with parameter offload); under a ZeRO-3 training config
    the reference is sharded like the policy either way.
    """

    max_tokens_per_micro_batch: int | None
    packing: bool | None
    logprob_chunk_tokens: int | None
    activation_checkpointing: bool
    offload_reference: bool
    attn_implementation: str | None
    tree: bool | None  # each micro-batch as its token tree: None where it pays, True, False (trainer/tree)

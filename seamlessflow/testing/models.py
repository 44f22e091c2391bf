"""Tiny random models that real engines and trainers can load, built on the machine (nothing downloaded):
a byte-level BPE tokenizer with a ChatML template and a 2-layer Qwen2 config with random weights (~3 s).
Shared by the tests and the benchmarks.

The long-context variant is the default model `up` serves, untrained: its tokenizer (16k merges learnt from
the demo's text and Python's standard library, English prose mixed with code, as agent harnesses' prompts
are) makes Codex's and Claude Code's 40-50 KB prompts 11-15k tokens, and its window (32k positions) holds
them. Tests that run harnesses on it show that the stack `make up` starts takes their prompts.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

from seamlessflow.chat_template import CHAT_TEMPLATE

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
GREETING = ["user\nassistant\nsystem\nHello, what is 2 + 3? The answer is 5."] * 10


def build_random_tiny_model(out: Path, seed: int = 0) -> Path:
    """The proxy and engine tests' model: a 300-token vocabulary and 2048 positions."""
    return _build(out, seed, GREETING, vocab_size=300, max_positions=2048)


def build_long_context_tiny_model(
    out: Path, seed: int = 0, vocab_size: int | None = None, max_positions: int | None = None
) -> Path:
    """The default model (`seamlessflow.model.FULL`) with random weights: its tokenizer and window, built in
    seconds; a smaller vocabulary or window when given."""
    import dataclasses

    from seamlessflow.model import FULL  # torch and transformers only when building
    from seamlessflow.model.build import build_untrained_model

    spec = dataclasses.replace(FULL, vocab_size=vocab_size or FULL.vocab_size,
                               max_position_embeddings=max_positions or FULL.max_position_embeddings)
    return build_untrained_model(out, spec, seed)


def _build(out: Path, seed: int, texts: Iterable[str], vocab_size: int, max_positions: int) -> Path:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    tokenizer = _train_tokenizer(texts, vocab_size)
    torch.manual_seed(seed)
    # head_dim is a PretrainedConfig kwarg that transformers' type stub omits (hence the ignore).
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,  # type: ignore[call-arg]
        num_attention_heads=2,
        num_key_value_heads=1,
        head_dim=64,
        max_position_embeddings=max_positions,
        tie_word_embeddings=False,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = Qwen2ForCausalLM(config)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    return out


def _train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(texts, trainer=trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>", chat_template=CHAT_TEMPLATE
    )

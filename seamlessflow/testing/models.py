"""Tiny random models that real engines and trainers can load, built on the machine (nothing downloaded):
a byte-level BPE tokenizer with a ChatML template and a 2-layer Qwen2 config with random weights (~3 s).
Shared by the tests and the benchmarks.

The long-context variant is for agent CLIs (Codex, Claude Code) whose system prompt and tool list are
40-50 KB: with the default 300-token vocabulary that is 32-40k tokens, so its tokenizer learns a larger
vocabulary from local English-and-code text (Python's own standard library), which makes the same prompts
11-15k tokens, and its RoPE positions reach far enough to hold them.
"""

from __future__ import annotations

import glob
import sysconfig
from collections.abc import Iterable
from pathlib import Path

from seamlessflow.chat_template import CHAT_TEMPLATE

SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
GREETING = ["user\nassistant\nsystem\nHello, what is 2 + 3? The answer is 5."] * 10


def build_random_tiny_model(out: Path, seed: int = 0) -> Path:
    """The proxy and engine tests' model: a 300-token vocabulary and 2048 positions."""
    return _build(out, seed, GREETING, vocab_size=300, max_positions=2048)


def build_long_context_tiny_model(
    out: Path, seed: int = 0, vocab_size: int = 16384, max_positions: int = 32768
) -> Path:
    """The agent CLIs' model: same shape, a tokenizer trained on local text, positions for a 15k-token prompt.

    Python's standard library source is on every machine that runs the tests and is English prose (docstrings,
    comments) mixed with code, which is what the CLIs' prompts and JSON tool schemas are made of."""
    return _build(out, seed, local_english_text(), vocab_size=vocab_size, max_positions=max_positions)


def local_english_text() -> list[str]:
    """The top-level modules of Python's standard library (~4.7 MB on 3.11), in a fixed order."""
    files = sorted(glob.glob(str(Path(sysconfig.get_paths()["stdlib"]) / "*.py")))
    return [Path(f).read_text(encoding="utf-8", errors="replace") for f in files]


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


def _train_tokenizer(texts: Iterable[str], vocab_size: int):
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

"""A byte-level BPE tokenizer trained on the demo tasks' text and local English prose and code, saved as an
HF tokenizer.

Byte-level so any text (an agent's system prompt, a tool result) still encodes; digits are split one per
token so the model sees numbers the way it must add them. Trained on the demo's text alone, its few hundred
merges made an agent harness's 40 KB prompt 30-40k tokens; learning merges from Python's standard library
(English docstrings and comments mixed with code, on every machine that runs Python, nothing downloaded)
too makes it a real subword tokenizer: the same prompt is about a third as many tokens. The chat template is
ChatML, the format Qwen models use, so agents and the proxy treat the tiny model like any other chat model
(`seamlessflow/chat_template.py`).
"""

from __future__ import annotations

import glob
import sysconfig
from collections.abc import Iterable
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from seamlessflow.chat_template import CHAT_TEMPLATE

IM_START, IM_END, END_OF_TEXT = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
SPECIAL_TOKENS = [END_OF_TEXT, IM_START, IM_END]


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Train on `texts`; the result ends a chat turn with <|im_end|> (its EOS)."""
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    bpe.train_from_iterator(texts, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe,
        eos_token=IM_END,
        pad_token=END_OF_TEXT,
        chat_template=CHAT_TEMPLATE,
    )
    return tokenizer


def local_english_text() -> list[str]:
    """The top-level modules of Python's standard library (~4.7 MB on 3.11), in a fixed order."""
    files = sorted(glob.glob(str(Path(sysconfig.get_paths()["stdlib"]) / "*.py")))
    return [Path(f).read_text(encoding="utf-8", errors="replace") for f in files]


def render_chat(prompt: str) -> list[dict[str, str]]:
    """The single-turn conversation a demo task is asked as."""
    return [{"role": "user", "content": prompt}]

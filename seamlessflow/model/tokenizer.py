"""A byte-level BPE tokenizer trained on the demo tasks' text, saved as an HF tokenizer.

Byte-level so any text (an agent's system prompt, a tool result) still encodes; digits
are split one per token so the model sees numbers the way it must add them. The chat
template is ChatML, the format Qwen models use, so agents and the proxy treat the tiny
model like any other chat model (`seamlessflow/chat_template.py`).
"""

from __future__ import annotations

from collections.abc import Iterable

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


def render_chat(prompt: str) -> list[dict[str, str]]:
    """The single-turn conversation a demo task is asked as."""
    return [{"role": "user", "content": prompt}]

"""A teacher's logprobs laid on a trajectory's own tokens, and whether a teacher may teach a student at all.

Why by token ids: the trajectory's tokens are bit-for-bit what inference saw; the teacher is asked for the
log-probability of each of those ids given exactly the ids before it (vLLM's prompt logprobs of the whole
sequence), never for a re-tokenised text. Each position the teacher answers names the id it scored, and that id
must be the trajectory's: an answer one position off, or for other ids, is refused here rather than trained.
A teacher with another tokenizer would score other strings under the same ids, so it is refused at start
(`tokenizer_difference`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence


class MisalignedTeacher(ValueError):
    """The teacher's answer does not stand position by position on the trajectory's tokens."""


def aligned_teacher_logprobs(tokens: Sequence[int], loss_mask: Sequence[int],
                             scored: Sequence[tuple[int, float] | None]) -> list[float]:
    """Per token: the teacher's logprob where the token was generated (loss mask 1), 0.0 elsewhere (prompt, tool
    and user tokens stay masked), NaN where the teacher gave none. ``scored[t]``: (the id the teacher scored at
    position t, its logprob given tokens[:t]); None at position 0, which has no prefix."""
    if len(scored) != len(tokens) or len(loss_mask) != len(tokens):
        raise MisalignedTeacher(f"the teacher scored {len(scored)} positions of {len(tokens)} tokens")
    out = []
    for t, (token, generated, entry) in enumerate(zip(tokens, loss_mask, scored, strict=True)):
        if entry is not None and entry[0] != token:
            raise MisalignedTeacher(f"position {t}: the teacher scored id {entry[0]}, the trajectory holds {token}")
        if not generated:
            out.append(0.0)
        else:
            out.append(float("nan") if entry is None else float(entry[1]))
    return out


def tokenizer_difference(probes: Sequence[str], student: Callable[[str], list[int]],
                         teacher: Callable[[str], list[int]]) -> str | None:
    """None when both tokenizers give the same ids for every probe text; else what differs, for the error a
    teacher is refused with."""
    for text in probes:
        ours, theirs = student(text), teacher(text)
        if ours != theirs:
            pairs = enumerate(zip(ours, theirs, strict=False))
            first = next((i for i, (a, b) in pairs if a != b), min(len(ours), len(theirs)))
            return (f"the teacher's tokenizer differs from the student's: {text[:40]!r} is {len(ours)} ids for the "
                    f"student and {len(theirs)} for the teacher, first differing at id {first} "
                    f"({ours[first:first + 3]} vs {theirs[first:first + 3]})")
    return None


def probe_texts(decode: Callable[[list[int]], str], vocab_size: int, samples: int = 64) -> list[str]:
    """Texts both tokenizers must agree on: fixed ones (digits, words, whitespace, non-ASCII) and the student's
    decoding of ids spread over its whole vocabulary, so a teacher with another vocabulary is caught."""
    step = max(vocab_size // samples, 1)
    spread = decode(list(range(0, vocab_size, step)))
    return ["12 + 35 = 47", "The answer is\n\n  forty-two.", "naïve café – 東京 🙂", spread]

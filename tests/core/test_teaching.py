"""The teacher's answer laid on the trajectory's own ids, and the tokenizer check a teacher must pass."""

import math

import pytest

from seamlessflow.core.teaching import (
    MisalignedTeacher,
    aligned_teacher_logprobs,
    probe_texts,
    tokenizer_difference,
)

TOKENS = [5, 6, 7, 8, 9, 10]
MASK = [0, 0, 1, 1, 0, 1]  # a prompt, two generated tokens, a tool token, one more generated


def test_generated_tokens_get_the_teachers_logprob_and_the_others_stay_zero():
    scored = [None, (6, -9.0), (7, -0.5), (8, -1.25), (9, -3.0), (10, -2.0)]
    assert aligned_teacher_logprobs(TOKENS, MASK, scored) == [0.0, 0.0, -0.5, -1.25, 0.0, -2.0]


def test_a_position_the_teacher_gave_nothing_for_is_nan_on_generated_tokens_only():
    out = aligned_teacher_logprobs([5, 6, 7], [1, 0, 1], [None, None, None])
    assert math.isnan(out[0]) and out[1] == 0.0 and math.isnan(out[2])


@pytest.mark.parametrize("scored", [
    [None, (6, -1.0), (7, -1.0), (8, -1.0), (9, -1.0)],  # one position short
    [None, (7, -1.0), (8, -1.0), (9, -1.0), (10, -1.0), (11, -1.0)],  # shifted by one
    [None, (6, -1.0), (7, -1.0), (99, -1.0), (9, -1.0), (10, -1.0)],  # another id (re-tokenised)
])
def test_an_answer_that_does_not_stand_on_the_trajectorys_ids_is_refused(scored):
    with pytest.raises(MisalignedTeacher):
        aligned_teacher_logprobs(TOKENS, MASK, scored)


def test_tokenizers_that_agree_on_every_probe_pass_and_one_that_splits_otherwise_is_named():
    chars = lambda text: [ord(c) for c in text]  # noqa: E731
    pairs = lambda text: [ord(text[i]) * 1000 + ord(text[i + 1]) if i + 1 < len(text) else ord(text[i])  # noqa: E731
                          for i in range(0, len(text), 2)]
    probes = probe_texts(lambda ids: "".join(chr(65 + i % 26) for i in ids), 260)
    assert tokenizer_difference(probes, chars, chars) is None
    message = tokenizer_difference(probes, chars, pairs)
    assert message is not None and "differs from the student's" in message and "first differing at id 0" in message

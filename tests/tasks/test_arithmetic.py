import pytest
from hypothesis import given
from hypothesis import strategies as st

from seamlessflow.tasks.arithmetic import (
    expression_of,
    extract_answer,
    generate_tasks,
    make_prompt,
    score_completion,
    solve,
)


def test_same_seed_gives_same_tasks():
    assert generate_tasks(seed=7, count=20) == generate_tasks(seed=7, count=20)


def test_other_seed_gives_other_tasks():
    assert generate_tasks(seed=7, count=20) != generate_tasks(seed=8, count=20)


def test_task_answers_are_correct():
    for task in generate_tasks(seed=1, count=50, ops=("+", "-")):
        left, op, right = _parse(task.prompt)
        assert task.answer == str(solve(left, op, right))


def test_task_ids_are_unique_and_name_the_seed():
    ids = [task.task_id for task in generate_tasks(seed=3, count=100)]
    assert len(set(ids)) == 100
    assert ids[0] == "arith-3-0"


def test_prompt_reads_like_a_question():
    assert make_prompt(23, "+", 48) == "What is 23+48?"


@pytest.mark.parametrize(
    "completion, expected",
    [("71", 71), (" 71<|im_end|>", 71), ("It is -5.", -5), ("no idea", None), ("", None)],
)
def test_extract_answer(completion, expected):
    assert extract_answer(completion) == expected


def test_exact_answer_scores_one():
    assert score_completion("71", "71") == 1.0


def test_no_number_scores_zero():
    assert score_completion("seventy-one", "71") == 0.0


def test_near_miss_beats_far_miss():
    near, far = score_completion("70", "71"), score_completion("20", "71")
    assert 0.0 < far < near < 1.0


def test_right_digit_count_earns_credit():
    assert score_completion("99", "11") > score_completion("999", "11")


@given(st.integers(-200, 200), st.integers(-200, 200))
def test_reward_is_bounded_and_only_exact_is_one(guess, truth):
    reward = score_completion(str(guess), str(truth))
    assert 0.0 <= reward <= 1.0
    assert (reward == 1.0) == (guess == truth)


def _parse(prompt):
    body = prompt.removeprefix("What is ").removesuffix("?")
    for op in "+-":
        if op in body:
            left, right = body.split(op)
            return int(left), op, int(right)
    raise AssertionError(prompt)


@given(st.integers(0, 999), st.sampled_from("+-"), st.integers(0, 999))
def test_expression_of_inverts_make_prompt(left, op, right):
    assert expression_of(make_prompt(left, op, right)) == f"{left}{op}{right}"


def test_expression_of_rejects_other_text():
    with pytest.raises(ValueError, match="not an arithmetic prompt"):
        expression_of("Tell me a joke")

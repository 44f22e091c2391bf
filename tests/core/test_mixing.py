"""Weighted mixing of task sources: shares hold in every prefix, and the order is a function of the counts."""

from hypothesis import given
from hypothesis import strategies as st

from seamlessflow.core.mixing import next_source


def sequence(weights, n):
    published = [0] * len(weights)
    out = []
    for _ in range(n):
        i = next_source(weights, published)
        published[i] += 1
        out.append(i)
    return out


def test_shares_two_to_one_to_one():
    assert sequence([2, 1, 1], 8) == [0, 1, 2, 0, 0, 1, 2, 0]


@given(st.lists(st.integers(1, 9), min_size=1, max_size=5), st.integers(1, 60))
def test_every_prefix_is_within_one_group_of_each_share(weights, n):
    order = sequence(weights, n)
    for k in range(1, n + 1):
        for i, w in enumerate(weights):
            assert abs(order[:k].count(i) - w / sum(weights) * k) < 1.0 + 1e-9


def test_a_source_with_all_weight_is_always_next_and_bad_weights_are_refused():
    import pytest

    assert sequence([1], 3) == [0, 0, 0]
    with pytest.raises(ValueError):
        next_source([1, 0], [0, 0])


def test_a_batch_is_summed_per_task_source_for_the_step_log():
    from seamlessflow.core.batching import KeptGroup, TrajectorySample
    from seamlessflow.core.mixing import source_figures, source_of_task

    def group(task_id, rewards):
        samples = [TrajectorySample(f"{task_id}/{i}", task_id, task_id, (1, 2, 3), (0, 1, 1), (0.0, -0.1, -0.1),
                                    (-1, 0, 0), r) for i, r in enumerate(rewards)]
        return KeptGroup(task_id, task_id, samples, [1.0] * len(samples))

    assert (source_of_task("math:arith-0-1.r2"), source_of_task("arith-0-1.r2")) == ("math", "default")
    batch = [group("math:a.r0", (1.0, 0.0)), group("code:b.r0", (0.5, 0.0, 0.25)), group("math:c.r0", (1.0, 1.0))]
    assert source_figures(batch) == {
        "math": {"groups": 2, "samples": 4, "tokens": 8, "reward_mean": 0.75},
        "code": {"groups": 1, "samples": 3, "tokens": 6, "reward_mean": 0.25}}

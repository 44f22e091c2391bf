"""Batch formation: de-dup, group completion, staleness, zero-variance skip, thresholds."""

import dataclasses

import pytest

from seamlessflow.core.batching import (
    BatchBuilder,
    BatchConfig,
    TrajectorySample,
    rewards_all_equal,
    solved_by_all,
)
from seamlessflow.testing import core_configs
from seamlessflow.testing.core_configs import staleness


def batch_config(**changes: object) -> BatchConfig:
    """The trainer's batching, but a batch of one group and no group timeout unless a case names them: the
    rules under test, not the stack's defaults."""
    return core_configs.batch_config(**{"threshold": 1, "group_timeout_s": None, **changes})


def sample(tid, group="g1", reward=1.0, versions=(-1, 0, 0), task="t1", status="done"):
    n = len(versions)
    return TrajectorySample(
        trajectory_id=tid, group_id=group, task_id=task, tokens=tuple(range(1, n + 1)),
        loss_mask=tuple(int(v >= 0) for v in versions), logprobs=(0.0,) * n, versions=tuple(versions),
        reward=reward, status=status,
    )


def test_sample_fields_must_have_equal_length():
    with pytest.raises(ValueError):
        TrajectorySample("a", "g", "t", (1, 2), (0, 1), (0.0,), (-1, 0), 1.0)


def test_oldest_version_ignores_non_generated_tokens():
    assert sample("a", versions=(-1, 3, 2, -1, 4)).oldest_version == 2
    assert sample("a", versions=(-1, -1)).oldest_version is None
    assert sample("a", versions=(-1, 3, 2)).trained_tokens == 2


def test_staleness_drop_and_downweight():
    old = sample("a", versions=(-1, 2, 5))  # oldest 2
    drop = staleness(max_staleness=1, mode="drop")
    assert drop.weight(old, current_version=3) == 1.0
    assert drop.weight(old, current_version=4) == 0.0
    down = staleness(max_staleness=1, mode="downweight", decay=0.5)
    assert down.weight(old, current_version=5) == 0.25
    assert staleness().weight(old, current_version=100) == 1.0


def test_rewards_all_equal():
    assert rewards_all_equal([sample("a", reward=1.0), sample("b", reward=1.0)])
    assert not rewards_all_equal([sample("a", reward=1.0), sample("b", reward=0.0)])


def test_solved_by_all_needs_two_sessions_at_the_success_reward():
    assert solved_by_all([1.0, 1.0], 1.0) and solved_by_all([0.9, 0.9], 0.8)
    assert not solved_by_all([1.0], 1.0) and not solved_by_all([1.0, 0.5], 1.0) and not solved_by_all([0.0, 0.0], 1.0)


def test_group_closes_at_size_and_batch_forms_at_group_threshold():
    builder = BatchBuilder(batch_config(group_size=2, threshold=2))
    builder.add(sample("a", "g1", 1.0), now=0)
    builder.add(sample("b", "g1", 0.0), now=0)
    assert builder.poll(current_version=0, now=0).batch == []  # one group, threshold two
    builder.add(sample("c", "g2", 1.0), now=0)
    assert builder.poll(0, 0).batch == []  # g2 still open
    builder.add(sample("d", "g2", 0.5), now=0)
    batch = builder.poll(0, 0).batch
    assert [g.group_id for g in batch] == ["g1", "g2"]
    assert [s.trajectory_id for s in batch[0].samples] == ["a", "b"]
    assert builder.pending_samples == []


def test_batch_takes_just_enough_oldest_groups():
    builder = BatchBuilder(batch_config(group_size=2, threshold=2))
    for i in range(3):
        builder.add(sample(f"a{i}", f"g{i}", 1.0), 0)
        builder.add(sample(f"b{i}", f"g{i}", 0.0), 0)
    assert [g.group_id for g in builder.poll(0, 0).batch] == ["g0", "g1"]
    assert builder.poll(0, 0).batch == []  # g2 alone is below the threshold
    assert [s.trajectory_id for s in builder.pending_samples] == ["a2", "b2"]


def test_token_threshold():
    builder = BatchBuilder(batch_config(group_size=2, threshold=5, threshold_kind="tokens"))
    builder.add(sample("a", "g1", 1.0), 0)  # 2 trained tokens each
    builder.add(sample("b", "g1", 0.0), 0)
    assert builder.poll(0, 0).batch == []
    builder.add(sample("c", "g2", 1.0), 0)
    builder.add(sample("d", "g2", 0.0), 0)
    assert sum(g.trained_tokens for g in builder.poll(0, 0).batch) == 8


def test_duplicates_are_ignored_and_counted():
    builder = BatchBuilder(batch_config(group_size=2), seen_ids={"old"})
    assert builder.add(sample("a", reward=1.0), 0)
    assert not builder.add(sample("a", reward=1.0), 0)
    assert not builder.add(sample("old", reward=0.0), 0)
    assert builder.counters.duplicates == 2
    assert builder.poll(0, 0).batch == []  # group still waiting for a second distinct sample


def test_zero_variance_group_is_skipped_and_task_remembered_when_too_easy():
    builder = BatchBuilder(batch_config(group_size=2, success_reward=1.0))
    for tid, group, task, reward in [("a", "g1", "easy", 1.0), ("b", "g1", "easy", 1.0),
                                      ("c", "g2", "hard", 0.0), ("d", "g2", "hard", 0.0)]:
        builder.add(sample(tid, group, reward, task=task), 0)
    result = builder.poll(0, 0)
    assert result.batch == []
    assert {s.trajectory_id for s in result.discarded} == {"a", "b", "c", "d"}
    assert builder.counters.groups_skipped_equal == 2
    assert set(builder.too_easy_tasks) == {"easy"}


def test_stale_samples_dropped_and_group_judged_on_the_rest():
    policy = staleness(max_staleness=2, mode="drop")
    builder = BatchBuilder(batch_config(group_size=3, staleness=policy))
    builder.add(sample("old", "g1", 0.0, versions=(-1, 1)), 0)
    builder.add(sample("new1", "g1", 1.0, versions=(-1, 4)), 0)
    builder.add(sample("new2", "g1", 1.0, versions=(-1, 4)), 0)
    result = builder.poll(current_version=5, now=0)
    # without "old" the group has equal rewards: nothing to learn
    assert builder.counters.stale_dropped == 1
    assert builder.counters.groups_skipped_equal == 1
    assert result.batch == []
    assert len(result.discarded) == 3


def test_downweighted_samples_carry_weights():
    policy = staleness(max_staleness=0, mode="downweight", decay=0.5)
    builder = BatchBuilder(batch_config(group_size=2, staleness=policy))
    builder.add(sample("a", reward=1.0, versions=(-1, 3)), 0)
    builder.add(sample("b", reward=0.0, versions=(-1, 5)), 0)
    [group] = builder.poll(current_version=5, now=0).batch
    assert group.weights == [0.25, 1.0]


def _two_groups_closed_at_once(builder):
    """g1 and g2 close in the same poll at version 0; a batch is one group, so g2 waits in the ready queue."""
    for tid, group, reward in [("a", "g1", 1.0), ("b", "g1", 0.0), ("c0", "g2", 0.0), ("c1", "g2", 1.0)]:
        builder.add(sample(tid, group, reward, versions=(-1, 0)), 0)


def test_a_group_that_went_stale_while_it_waited_is_dropped_when_taken():
    builder = BatchBuilder(batch_config(group_size=2, staleness=staleness(max_staleness=1, mode="drop")))
    _two_groups_closed_at_once(builder)
    [first] = builder.poll(current_version=0, now=0).batch
    assert first.group_id == "g1" and builder.steps_ready() == 1  # g2 kept at version 0, waiting
    result = builder.poll(current_version=2, now=0)  # the trainer moved 2 versions on: g2 is beyond the bound
    assert result.batch == []
    assert sorted(s.trajectory_id for s in result.discarded) == ["c0", "c1"]
    assert (builder.counters.stale_at_train, builder.counters.groups_stale_at_train) == (2, 1)
    assert builder.counters.stale_dropped == 0 and builder.pending_samples == []


def test_a_group_that_went_stale_while_it_waited_weighs_less_when_taken():
    builder = BatchBuilder(batch_config(group_size=2, staleness=staleness(max_staleness=0, mode="downweight",
                                                                          decay=0.5)))
    _two_groups_closed_at_once(builder)
    assert builder.poll(current_version=0, now=0).batch[0].weights == [1.0, 1.0]
    [second] = builder.poll(current_version=2, now=0).batch
    assert second.group_id == "g2" and second.weights == [0.25, 0.25]
    assert builder.counters.stale_at_train == 0


def test_a_waiting_group_loses_its_stale_sample_and_is_trained_on_the_rest():
    builder = BatchBuilder(batch_config(group_size=3, staleness=staleness(max_staleness=1, mode="drop")))
    for tid, group, reward, version in [("a", "g1", 1.0, 1), ("b", "g1", 0.0, 1), ("c", "g1", 0.0, 1),
                                         ("c0", "g2", 0.0, 0), ("c1", "g2", 1.0, 1), ("c2", "g2", 0.0, 1)]:
        builder.add(sample(tid, group, reward, versions=(-1, version)), 0)
    builder.poll(current_version=1, now=0)  # g1 taken; g2 kept whole at version 1 (c0 lags by 1: within)
    result = builder.poll(current_version=2, now=0)
    [second] = result.batch
    assert [s.trajectory_id for s in second.samples] == ["c1", "c2"] and second.weights == [1.0, 1.0]
    assert [s.trajectory_id for s in result.discarded] == ["c0"]
    assert (builder.counters.stale_at_train, builder.counters.groups_stale_at_train) == (1, 0)


def test_timeout_closes_incomplete_group_and_late_members_are_discarded():
    builder = BatchBuilder(batch_config(group_size=4, group_timeout_s=10))
    builder.add(sample("a", reward=1.0), now=0)
    builder.add(sample("b", reward=0.0), now=5)
    assert builder.poll(0, now=9).batch == []
    [group] = builder.poll(0, now=10).batch
    assert len(group.samples) == 2
    assert not builder.add(sample("c", reward=0.5), now=11)
    assert builder.counters.late == 1
    assert [s.trajectory_id for s in builder.poll(0, 11).discarded] == ["c"]


def test_failed_sample_counts_towards_group_and_lone_survivor_is_discarded():
    builder = BatchBuilder(batch_config(group_size=2))
    assert not builder.add(sample("x", reward=1.0, status="failed"), 0)
    builder.add(sample("a", reward=1.0), 0)
    result = builder.poll(0, 0)
    assert result.batch == []
    assert builder.counters.bad_status == 1
    assert builder.counters.groups_too_small == 1
    assert [s.trajectory_id for s in result.discarded] == ["x", "a"]
    assert builder.pending_samples == []


def test_forget_pending_lets_held_samples_come_back_but_not_trained_ones():
    builder = BatchBuilder(batch_config(group_size=2))
    builder.add(sample("a", "g1", 1.0), 0)
    builder.add(sample("b", "g1", 0.0), 0)
    assert len(builder.poll(0, 0).batch) == 1  # a, b trained
    builder.add(sample("c", "g2", 1.0), 0)
    assert [s.trajectory_id for s in builder.forget_pending()] == ["c"]
    assert not builder.add(sample("a", "g1", 1.0), 0)  # replayed but already trained
    assert builder.add(sample("c", "g2", 1.0), 0)
    builder.add(sample("d", "g2", 0.0), 0)
    assert [g.group_id for g in builder.poll(0, 0).batch] == ["g2"]


def test_ids_are_remembered_only_within_the_window():
    builder = BatchBuilder(batch_config(group_size=2, dedup_window=4))
    for i in range(10):
        builder.add(sample(f"a{i}", f"g{i}", 1.0), 0)
        builder.add(sample(f"b{i}", f"g{i}", 0.0), 0)
    builder.poll(0, 0)
    assert not builder.add(sample("b9", "g9", 0.0), 0)  # within the window: a duplicate
    assert builder.counters.duplicates == 1
    assert builder.add(sample("a0", "gx", 1.0), 0)  # far behind: no longer remembered (bounded memory)


def test_steps_ready_counts_judged_groups_against_the_threshold():
    builder = BatchBuilder(batch_config(group_size=2, threshold=2))
    for i in range(5):
        builder.add(sample(f"a{i}", f"g{i}", 1.0), 0)
        builder.add(sample(f"b{i}", f"g{i}", 0.0), 0)
    assert builder.steps_ready() == 0  # closed, not judged yet
    builder.poll(0, 0)  # hands out two groups, three wait
    assert builder.steps_ready() == 1.5


def test_equal_session_rewards_are_kept_under_a_per_turn_rule_when_the_turns_differ():
    from dataclasses import replace

    from seamlessflow.core.turn_advantages import AdvantageRule

    a = replace(sample("a", "g1", 1.0), turn_ends=(1, 3), turn_rewards=(1.0, 0.0))
    b = replace(sample("b", "g1", 1.0), turn_ends=(1, 3), turn_rewards=(0.0, 0.0))
    c, d = sample("c", "g2", 1.0), sample("d", "g2", 1.0)  # no turn rewards: still nothing to learn
    session = BatchBuilder(batch_config(group_size=2))
    per_turn = BatchBuilder(batch_config(group_size=2, advantage=AdvantageRule.PER_TURN_GROUP))
    for builder in (session, per_turn):
        for s in (a, b, c, d):
            builder.add(s, 0)
    assert session.poll(0, 0).batch == []
    assert [g.group_id for g in per_turn.poll(0, 0).batch] == ["g1"]


def test_too_easy_tasks_are_the_newest_window_when_every_group_names_a_new_task():
    builder = BatchBuilder(batch_config(group_size=2, success_reward=1.0, dedup_window=3),
                           too_easy_tasks=["from-checkpoint-a", "from-checkpoint-b"])
    for n in range(2):
        for tid in ("a", "b"):
            builder.add(sample(f"{tid}{n}", f"g{n}", 1.0, task=f"task-{n}"), 0)
        builder.poll(0, 0)
    assert list(builder.too_easy_tasks) == ["from-checkpoint-b", "task-0", "task-1"]  # the oldest fell out first
    for n in range(2, 5):
        for tid in ("a", "b"):
            builder.add(sample(f"{tid}{n}", f"g{n}", 1.0, task=f"task-{n}"), 0)
        builder.poll(0, 0)
    assert list(builder.too_easy_tasks) == ["task-2", "task-3", "task-4"]


def taught(tid, group, reward):
    return dataclasses.replace(sample(tid, group, reward), teacher_logprobs=(0.0, -0.5, -0.25))


def test_under_distillation_a_taught_group_of_one_or_of_equal_rewards_is_trained_and_an_untaught_one_is_not():
    builder = BatchBuilder(batch_config(group_size=2, threshold=2, distills=True, group_timeout_s=1.0))
    for tid, group, reward in [("a", "g1", 1.0), ("b", "g1", 1.0), ("c", "g2", 0.0)]:
        builder.add(taught(tid, group, reward), 0)
    builder.add(sample("d", "g3", 0.0), 0)
    builder.add(sample("e", "g3", 0.0), 0)
    result = builder.poll(0, now=5.0)  # g2 closed by its timeout with one sample
    assert sorted(s.trajectory_id for g in result.batch for s in g.samples) == ["a", "b", "c"]
    assert builder.counters.groups_skipped_equal == 1  # g3: equal rewards and no teacher

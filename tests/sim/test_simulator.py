"""Simulator sanity: the real policies reach the requested steps with the expected staleness."""

import pytest

from seamlessflow.core.policies import POLICIES
from seamlessflow.core.timeline import time_by_kind
from seamlessflow.scheduler.options import SchedulerOptions
from seamlessflow.sim import Simulator, simulate


def kinds_of(result, resource_id):
    return {i.kind for i in result.intervals if i.resource_id == resource_id}


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_trains_the_requested_steps(policy):
    result = simulate(policy, gpus=8, mix=0.5, steps=3)
    assert result.steps == 3
    assert result.trained_tokens >= 3 * result.batch_size * 1024
    assert result.throughput > 0
    assert 0.0 <= result.bubble_ratio < 1.0


def test_same_seed_gives_the_same_run_and_another_seed_does_not():
    first = simulate("multiplexed", gpus=8, mix=0.5, steps=3, seed=7).summary()
    assert simulate("multiplexed", gpus=8, mix=0.5, steps=3, seed=7).summary() == first
    assert simulate("multiplexed", gpus=8, mix=0.5, steps=3, seed=8).summary() != first


def test_colocated_is_on_policy_and_asynchronous_policies_are_off_policy():
    assert simulate("colocated", gpus=8, steps=3).staleness_max == 0
    off_policy = simulate("disaggregated", gpus=8, mix=0.5, steps=4)
    assert 0.0 < off_policy.staleness_mean <= 2.0


def test_colocated_baseline_is_calibrated_to_a_rollout_dominated_step():
    """Published synchronous long-CoT RL runs spend 70-90 % of a step generating."""
    assert 0.70 <= simulate("colocated", gpus=64, steps=2).rollout_share <= 0.90


def test_multiplexed_moves_flexible_resources_and_never_stops_rollout_only_ones():
    result = simulate("multiplexed", gpus=8, mix=0.5, steps=3)
    assert {"rollout", "train"} <= kinds_of(result, "gpu007")  # flexible
    assert "train" not in kinds_of(result, "gpu000")  # rollout only


def test_disaggregated_pools_never_change_roles():
    result = simulate("disaggregated", gpus=8, mix=0.5, steps=3)
    assert "rollout" not in kinds_of(result, "gpu007")
    assert "train" not in kinds_of(result, "gpu000")


def test_a_failed_trainer_is_replaced_and_the_run_completes():
    config = SchedulerOptions(train_pool_size=1, switch_cost_s=8.0, min_dwell_s=16.0).scheduler_config()
    sim = Simulator("disaggregated", gpus=8, mix=0.5, steps=3, config=config, failures={"gpu004": 40.0})
    result = sim.run()
    assert result.steps == 3
    assert "failed" in kinds_of(result, "gpu004")
    assert "train" in kinds_of(result, "gpu005")  # the next train-capable resource took over
    assert time_by_kind(result.intervals)["failed"] > 0


def test_colocated_uses_every_gpu_for_training_whatever_the_mix():
    assert simulate("colocated", gpus=8, mix=0.25, steps=1).train_capable == 8


def test_a_mix_that_leaves_nothing_to_train_is_refused():
    with pytest.raises(ValueError, match="able to train"):
        Simulator("multiplexed", gpus=8, mix=0.0)


def test_every_gpu_second_is_in_an_account_and_the_bubble_is_the_accounts():
    result = simulate("multiplexed", gpus=8, mix=0.5, steps=3, seed=0)
    books = result.accounts()
    assert books.devices == 8 and books.bubble == pytest.approx(result.bubble_ratio, abs=1e-9)
    assert books.seconds["wait-data"] > 0  # flexible GPUs on `train` waiting for a batch
    assert sum(books.seconds.values()) == pytest.approx(8 * result.seconds, rel=1e-6)

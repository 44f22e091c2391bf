"""Each policy on scripted scenarios: batch ready, failures, switch costs and dwell, weight updates."""

import pytest

from seamlessflow.core.policies import (
    POLICIES,
    LoadWeights,
    Pause,
    PipelineState,
    Resume,
    SetActive,
    get_policy,
)
from seamlessflow.core.policies.base import switch_cost
from seamlessflow.core.resources import ResourceState, make_resource
from seamlessflow.core.scheduler import plan
from seamlessflow.scheduler.options import SchedulerOptions

ACTIVE = ResourceState.ACTIVE
CONFIG = SchedulerOptions(switch_cost_s=5.0, min_dwell_s=10.0, heartbeat_timeout_s=30.0).scheduler_config()
NOW = 100.0


def res(rid, active, *tags, **kw):
    kw.setdefault("last_heartbeat", NOW)
    return make_resource(rid, *tags, state=kw.pop("state", ACTIVE), active=active, **kw)


def decide(policy, resources, **pipeline):
    pipeline.setdefault("batch_threshold", 4)
    return list(plan(policy, resources, PipelineState(**pipeline), CONFIG, NOW).commands)


def test_registry_names_the_three_policies_and_their_staleness_bounds():
    assert {name: spec.max_staleness for name, spec in POLICIES.items()} == {
        "colocated": 0, "disaggregated": 1, "multiplexed": 1}
    with pytest.raises(KeyError, match="known: colocated"):
        get_policy("round-robin")


# colocated

def test_colocated_keeps_generating_until_the_batch_is_ready():
    both = [res("a", "rollout", "rollout", "train"), res("b", "rollout", "rollout", "train")]
    assert decide("colocated", both, buffered=3) == []


def test_colocated_moves_everyone_to_train_when_the_batch_is_ready():
    both = [res("a", "rollout", "rollout", "train"), res("b", "rollout", "rollout", "train")]
    assert decide("colocated", both, buffered=4) == [SetActive("a", "train"), SetActive("b", "train")]


def test_colocated_returns_to_rollout_with_new_weights_after_the_step():
    both = [res("a", "train", "rollout", "train"), res("b", "train", "rollout", "train")]
    assert decide("colocated", both, buffered=0, current_version=1) == [
        SetActive("a", "rollout"), LoadWeights("a", 1), SetActive("b", "rollout"), LoadWeights("b", 1)]


def test_colocated_stays_on_train_while_the_step_runs():
    both = [res("a", "train", "rollout", "train")]
    assert decide("colocated", both, buffered=0, training=True) == []


# disaggregated

def test_disaggregated_puts_train_capable_resources_in_the_train_pool():
    resources = [res("g", "idle", "rollout"), res("t", "idle", "rollout", "train")]
    assert decide("disaggregated", resources) == [SetActive("g", "rollout"), SetActive("t", "train")]


def test_disaggregated_rollout_never_stops_when_a_batch_is_ready():
    resources = [res("g", "rollout", "rollout"), res("t", "train", "rollout", "train")]
    assert decide("disaggregated", resources, buffered=8, training=True) == []


def test_disaggregated_loads_each_new_version_with_pause_load_resume():
    resources = [res("g", "rollout", "rollout"), res("t", "train", "rollout", "train", weight_version=1)]
    assert decide("disaggregated", resources, current_version=1) == [Pause("g"), LoadWeights("g", 1), Resume("g")]


def test_disaggregated_splits_all_flexible_resources_in_half():
    resources = [res(i, "idle", "rollout", "train") for i in "abcd"]
    commands = decide("disaggregated", resources)
    assert sorted(c.role for c in commands) == ["rollout", "rollout", "train", "train"]


# multiplexed

def test_multiplexed_flexible_resources_generate_while_the_trainer_waits():
    resources = [res("g", "rollout", "rollout"), res("f", "rollout", "rollout", "train")]
    assert decide("multiplexed", resources, buffered=1) == []


def test_multiplexed_preempts_flexible_resources_when_a_batch_is_ready():
    resources = [res("g", "rollout", "rollout"), res("f", "rollout", "rollout", "train")]
    assert decide("multiplexed", resources, buffered=4) == [SetActive("f", "train")]


def test_multiplexed_returns_flexible_resources_after_the_update_and_updates_rollout_only_ones():
    resources = [res("g", "rollout", "rollout"), res("f", "train", "rollout", "train", last_switch=50.0)]
    commands = decide("multiplexed", resources, buffered=0, queued_tasks=3, current_version=1, trajectory_rate=0.1)
    assert commands == [Pause("g"), LoadWeights("g", 1), Resume("g"), SetActive("f", "rollout"), LoadWeights("f", 1)]


def test_multiplexed_stays_on_train_when_the_next_batch_is_closer_than_a_round_trip():
    flex = [res("f", "train", "rollout", "train", last_switch=50.0)]
    # 2 trajectories missing at 1/s: 2 s < two switches of 5 s
    assert decide("multiplexed", flex, buffered=2, queued_tasks=3, current_version=1, trajectory_rate=1.0) == []
    # 2 missing at 0.1/s: 20 s > 10 s, so going back to rollout pays
    assert decide("multiplexed", flex, buffered=2, queued_tasks=3, current_version=1, trajectory_rate=0.1) == [
        SetActive("f", "rollout"), LoadWeights("f", 1)]


def test_the_measured_weight_update_prices_the_switch_instead_of_the_constant():
    slow = PipelineState(weight_update_s=30.0)
    assert switch_cost(slow, CONFIG) == 30.0 and switch_cost(PipelineState(), CONFIG) == CONFIG.switch_cost_s
    flex = [res("f", "train", "rollout", "train", last_switch=50.0)]
    # 2 missing at 0.1/s: 20 s. Two constant switches (10 s) are cheaper than waiting, two measured 30 s
    # updates (60 s) are not: the same pipeline keeps the resource on train.
    assert decide("multiplexed", flex, buffered=2, queued_tasks=3, current_version=1, trajectory_rate=0.1,
                  weight_update_s=30.0) == []
    assert decide("multiplexed", flex, buffered=2, queued_tasks=3, current_version=1, trajectory_rate=0.1,
                  weight_update_s=2.0) == [SetActive("f", "rollout"), LoadWeights("f", 1)]


def test_multiplexed_stays_on_train_when_rollout_only_resources_take_all_the_work():
    flex = [res("f", "train", "rollout", "train", last_switch=50.0)]
    assert decide("multiplexed", flex, buffered=0, queued_tasks=0, in_flight=3, current_version=1,
                  trajectory_rate=0.01) == []


def test_multiplexed_sends_flexible_resources_home_with_new_weights_when_there_is_no_work():
    flex = [res("f", "train", "rollout", "train", last_switch=50.0)]
    assert decide("multiplexed", flex, buffered=0, queued_tasks=0, in_flight=0, current_version=1) == [
        SetActive("f", "rollout"), LoadWeights("f", 1)]
    assert decide("multiplexed", flex, buffered=0, queued_tasks=0, in_flight=0, training=True) == []


def test_multiplexed_respects_minimum_dwell_time_before_switching_again():
    just_switched = [res("f", "rollout", "rollout", "train", last_switch=NOW - 3.0)]
    assert decide("multiplexed", just_switched, buffered=4) == []
    dwelt = [res("f", "rollout", "rollout", "train", last_switch=NOW - 10.0)]
    assert decide("multiplexed", dwelt, buffered=4) == [SetActive("f", "train")]


def test_multiplexed_leaves_resources_with_a_command_in_flight_alone():
    switching = [res("f", "train", "rollout", "train", state=ResourceState.SWITCHING)]
    paused = [res("g", "rollout", "rollout", state=ResourceState.PAUSED)]
    assert decide("multiplexed", switching, buffered=0, current_version=1) == []
    assert decide("multiplexed", paused, current_version=1) == []


def test_multiplexed_ignores_a_failed_flexible_resource_and_keeps_rollout_going():
    resources = [res("g", "rollout", "rollout"), res("f", "rollout", "rollout", "train", last_heartbeat=0.0)]
    decision = plan("multiplexed", resources, PipelineState(buffered=4, batch_threshold=4), CONFIG, NOW)
    assert decision.failed == ("f",)
    assert decision.commands == ()


@pytest.mark.parametrize("policy", sorted(POLICIES))
def test_every_policy_is_idempotent_once_commands_are_in_flight(policy):
    from seamlessflow.core.scheduler import expect_all

    resources = [
        res("g", "idle", "rollout"),
        res("f", "idle", "rollout", "train"),
        res("h", "idle", "rollout", "train"),
    ]
    pipeline = PipelineState(buffered=4, batch_threshold=4, current_version=2)
    first = plan(policy, resources, pipeline, CONFIG, NOW).commands
    assert first
    after = expect_all(resources, first, NOW)
    assert plan(policy, after, pipeline, CONFIG, NOW + 1).commands == ()

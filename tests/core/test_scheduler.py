"""The decision step around the policies: failures, epochs, the injected clock, expected states."""

from dataclasses import replace

from seamlessflow.core.policies import LoadWeights, Pause, PipelineState, Resume, SetActive
from seamlessflow.core.resources import EpochBook, ResourceState, make_resource
from seamlessflow.core.scheduler import Scheduler, expect, expect_all, plan, split_failed
from seamlessflow.scheduler.options import SchedulerOptions

ACTIVE = ResourceState.ACTIVE
DEFAULT_CONFIG = SchedulerOptions().scheduler_config()


def rollout(rid, *tags, **kw):
    kw.setdefault("last_heartbeat", 100.0)
    return make_resource(rid, *(tags or ("rollout",)), state=ACTIVE, active="rollout", **kw)


def test_silent_resource_is_declared_failed_and_left_out_of_the_policy():
    resources = [rollout("a"), rollout("b", last_heartbeat=50.0)]
    healthy, failed = split_failed(resources, now=100.0, timeout_s=10.0)
    assert [r.id for r in healthy] == ["a"]
    assert failed == ["b"]


def test_already_failed_resources_are_not_reported_again():
    resources = [rollout("a"), make_resource("b", "rollout", state=ResourceState.FAILED)]
    assert split_failed(resources, now=100.0, timeout_s=10.0) == ([resources[0]], [])


def test_plan_of_failed_trainer_moves_train_role_to_a_healthy_flexible_resource():
    trainer = make_resource("a", "rollout", "train", state=ACTIVE, active="train", last_heartbeat=0.0)
    spare = rollout("b", "rollout", "train")
    config = SchedulerOptions(train_pool_size=1).scheduler_config()
    decision = plan("disaggregated", [trainer, spare], PipelineState(), config, now=100.0)
    assert decision.failed == ("a",)
    assert decision.commands == (SetActive("b", "train"),)


def test_scheduler_stamps_increasing_epochs_and_reads_its_clock():
    now = [100.0]
    sched = Scheduler("disaggregated", clock=lambda: now[0], config=DEFAULT_CONFIG, epochs=EpochBook(issued={"r": 4}))
    stale = rollout("r", weight_version=0)
    first, _ = sched.step([stale], PipelineState(current_version=1))
    assert [s.epoch for s in first] == [5, 6, 7]
    assert [s.command for s in first] == [Pause("r"), LoadWeights("r", 1), Resume("r")]
    now[0] = 200.0  # clock moved past the heartbeat timeout: no commands, a failure
    second, failed = sched.step([stale], PipelineState(current_version=1))
    assert second == [] and failed == ("r",)


def test_expected_states_keep_a_repeated_step_from_reissuing_commands():
    flex = rollout("f", "rollout", "train")
    pipeline = PipelineState(buffered=4, batch_threshold=4)
    commands = plan("multiplexed", [flex], pipeline, DEFAULT_CONFIG, now=100.0).commands
    after = expect_all([flex], commands, now=100.0)
    assert after[0].state is ResourceState.SWITCHING and after[0].last_switch == 100.0
    assert plan("multiplexed", after, pipeline, DEFAULT_CONFIG, now=101.0).commands == ()


def test_expect_follows_the_weight_update_sequence():
    r = rollout("r")
    paused = expect(r, Pause("r"), now=1.0)
    assert paused.state is ResourceState.PAUSED
    assert expect(paused, LoadWeights("r", 2), now=1.0).state is ResourceState.PAUSED
    assert expect(paused, Resume("r"), now=1.0).state is ResourceState.ACTIVE


def test_roles_decided_outside_the_policy_steer_those_resources_under_its_dwell_rules():
    """The training share's turns: red's trainer goes idle, blue's to train, once each has dwelt its minimum."""
    red = make_resource("trainer-red", "train", state=ACTIVE, active="train", last_heartbeat=100.0, last_switch=0.0)
    blue = make_resource("trainer-blue", "train", state=ACTIVE, active="idle", last_heartbeat=100.0,
                         last_switch=95.0)
    roles = {"trainer-red": "idle", "trainer-blue": "train"}
    decision = plan("disaggregated", [red, blue], PipelineState(), DEFAULT_CONFIG, now=100.0, roles=roles)
    assert decision.commands == (SetActive("trainer-red", "idle"),)  # blue switched 5 s ago: it waits
    red, blue = (replace(r, last_heartbeat=120.0) for r in (red, blue))
    later = plan("disaggregated", [red, blue], PipelineState(), DEFAULT_CONFIG, now=120.0, roles=roles)
    assert set(later.commands) == {SetActive("trainer-red", "idle"), SetActive("trainer-blue", "train")}
    assert plan("disaggregated", [red, blue], PipelineState(), DEFAULT_CONFIG, now=120.0).commands == (
        SetActive("trainer-blue", "train"),)  # without the roles, the policy trains every trainer

from dataclasses import fields

import pytest
from pydantic import ValidationError

from seamlessflow.config import Settings
from seamlessflow.core.autoscale import ScalingLimits
from seamlessflow.scheduler.options import AutoscaleOptions, ManagerOptions, SchedulerOptions


def test_batch_and_group_follow_the_trainer_unless_set():
    settings = Settings(trainer={"batch_threshold": 3, "group_size": 2, "success_reward": 0.9})
    assert SchedulerOptions.from_settings(settings).batch_threshold == 6
    manager = ManagerOptions.from_settings(settings)
    assert (manager.group_size, manager.success_reward) == (2, 0.9)
    settings = Settings(trainer={"batch_threshold": 3}, scheduler={"batch_threshold": 5}, manager={"group_size": 1})
    assert SchedulerOptions.from_settings(settings).batch_threshold == 5
    assert ManagerOptions.from_settings(settings).group_size == 1


def test_defaults_without_trainer_section_and_typos_rejected():
    assert SchedulerOptions.from_settings(Settings()).batch_threshold == 8
    with pytest.raises(ValidationError):
        SchedulerOptions.from_settings(Settings(scheduler={"polcy": "colocated"}))
    with pytest.raises(ValidationError):
        SchedulerOptions.from_settings(Settings(scheduler={"policy": "round-robin"}))


def test_autoscale_is_off_by_default_and_its_limits_are_the_policys():
    options = SchedulerOptions.from_settings(Settings())
    assert not options.autoscale.enabled and options.autoscale.limits() == ScalingLimits()
    assert {f.name for f in fields(ScalingLimits)} <= set(AutoscaleOptions.model_fields)  # every limit configurable
    settings = Settings(scheduler={"autoscale": {"enabled": True, "max_engines": 16, "cooldown_s": 30}})
    limits = SchedulerOptions.from_settings(settings).autoscale.limits()
    assert (limits.max_engines, limits.cooldown_s, limits.min_engines) == (16, 30.0, 1)
    with pytest.raises(ValidationError, match="min_engines <= max_engines"):
        SchedulerOptions.from_settings(Settings(scheduler={"autoscale": {"min_engines": 4, "max_engines": 2}}))
    with pytest.raises(ValidationError):
        SchedulerOptions.from_settings(Settings(scheduler={"autoscale": {"max_engine": 4}}))

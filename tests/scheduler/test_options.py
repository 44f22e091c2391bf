import pytest
from pydantic import ValidationError

from seamlessflow.config import Settings
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions


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

import pytest
from pydantic import ValidationError

from seamlessflow.config import Settings
from seamlessflow.scheduler.options import manager_options, scheduler_options


def test_batch_and_group_follow_the_trainer_unless_set():
    settings = Settings(trainer={"batch_threshold": 3, "group_size": 2, "success_reward": 0.9})
    assert scheduler_options(settings).batch_threshold == 6
    assert (manager_options(settings).group_size, manager_options(settings).success_reward) == (2, 0.9)
    settings = Settings(trainer={"batch_threshold": 3}, scheduler={"batch_threshold": 5}, manager={"group_size": 1})
    assert (scheduler_options(settings).batch_threshold, manager_options(settings).group_size) == (5, 1)


def test_defaults_without_trainer_section_and_typos_rejected():
    assert scheduler_options(Settings()).batch_threshold == 8
    with pytest.raises(ValidationError):
        scheduler_options(Settings(scheduler={"polcy": "colocated"}))
    with pytest.raises(ValidationError):
        scheduler_options(Settings(scheduler={"policy": "round-robin"}))

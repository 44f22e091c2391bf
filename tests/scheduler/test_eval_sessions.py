"""The scheduler counts no eval session as rollout data (real broker for the service's clients)."""

from seamlessflow.core.evaluation import eval_group_id
from seamlessflow.scheduler.options import ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.testing.scheduler_fakes import trajectory


def test_eval_trajectories_neither_fill_the_buffer_nor_the_rate(settings, codec):
    service = SchedulerService(settings, SchedulerOptions(batch_threshold=2), ManagerOptions(group_size=2), codec)
    service.fold(trajectory(eval_group_id(settings.run, 0, "eval-0-1"), "eval-s1"))
    assert service.pipeline().buffered == 0 and service.pipeline().trajectory_rate == 0
    service.fold(trajectory("g1", "s1"))
    assert service.pipeline().buffered == 1

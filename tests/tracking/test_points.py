"""Scalar points from heartbeats, weight versions and eval records (pure)."""

from types import SimpleNamespace

from seamlessflow.testing.tracking_records import eval_json, rollout_status, trainer_status, weights
from seamlessflow.tracking.points import PointMaker, eval_result


def tags(points):
    return {(p.tag, p.step): p.value for p in points}


def test_a_point_per_trainer_step_not_per_heartbeat():
    maker = PointMaker("default", "default")
    out = []
    for i, (step, reward) in enumerate([(0, 0.0), (1, 0.2), (1, 0.2), (1, 0.2), (2, 0.5)]):
        out += maker.feed(trainer_status(step, reward, 1000 * (i + 1)))
    rewards = [(p.step, p.value) for p in out if p.tag == "train/reward_mean"]
    assert rewards == [(1, 0.2), (2, 0.5)]
    assert tags(out)[("throughput/steps_per_min", 2)] == 60.0 / 3  # step 1 at 2 s, step 2 at 5 s


def test_rollout_throughput_is_averaged_over_the_step():
    maker = PointMaker()
    maker.feed(rollout_status("rollout-0", 10.0, 1000))
    maker.feed(rollout_status("rollout-1", 30.0, 1100))  # sum 40
    maker.feed(rollout_status("rollout-0", 50.0, 2000))  # sum 80
    points = maker.feed(trainer_status(1, 0.1, 2500))
    assert tags(points)[("throughput/rollout_tokens_per_s", 1)] == (10 + 40 + 80) / 3


def test_eval_lands_at_the_step_of_its_version_else_at_the_version_once_it_waited():
    maker = PointMaker(eval_wait_s=10.0)
    maker.feed(weights(version=1, step=4, at_ms=1000), now_s=0.0)
    assert tags(maker.feed(eval_result(eval_json(1, 0.25, 0.3, 17.0)), now_s=0.0))[("eval/accuracy", 4)] == 0.25
    assert maker.feed(SimpleNamespace(version=7, accuracy=0.5, mean_reward=0.5, mean_length=9,
                                      team="default", run="default"), now_s=1.0) == []
    assert maker.overdue(now_s=10.9) == []
    assert tags(maker.overdue(now_s=11.0))[("eval/accuracy", 7)] == 0.5
    assert maker.overdue(now_s=99.0) == []  # written once


def test_an_eval_read_before_its_versions_weights_record_waits_for_the_step():
    maker = PointMaker()  # the eval and weights topics are read with no order between them
    assert maker.feed(eval_result(eval_json(2, 0.8, 0.4, 16.0)), now_s=0.0) == []
    points = tags(maker.feed(weights(version=2, step=4, at_ms=1000), now_s=1.0))
    assert points[("train/version", 4)] == 2.0 and points[("eval/accuracy", 4)] == 0.8


def test_other_runs_and_non_eval_records_make_no_points():
    maker = PointMaker("default", "default")
    assert maker.feed(trainer_status(3, 0.9, 1000, run="other")) == []
    assert eval_result(b"not json") is None
    assert eval_result(b'{"version": 1}') is None  # no figure


def test_without_the_weights_record_the_trainer_heartbeat_says_where_a_version_began():
    maker = PointMaker()  # e.g. a compacted weights topic kept only the newest version
    assert maker.feed(eval_result(eval_json(1, 0.5, 0.5, 9.0)), now_s=0.0) == []  # read before the heartbeats
    maker.feed(trainer_status(3, 0.1, 1000, version=0), now_s=0.0)
    assert tags(maker.feed(trainer_status(4, 0.2, 2000, version=1), now_s=0.0))[("eval/accuracy", 4)] == 0.5
    maker.feed(trainer_status(5, 0.3, 3000, version=1), now_s=0.0)
    assert tags(maker.feed(eval_result(eval_json(1, 0.6, 0.5, 9.0)), now_s=0.0))[("eval/accuracy", 4)] == 0.6


def test_the_pipeline_backlog_is_one_point_per_step():
    from seamlessflow.messages import ResourceStatus

    def scheduler(buffered, at_ms):
        return ResourceStatus("x", "scheduler", "scheduler", [], "multiplexed", "active", 0, {"buffered": buffered},
                              "default", "default", at_ms)
    maker = PointMaker()
    out = [p for m in (scheduler(8, 100), scheduler(16, 200), trainer_status(1, 0.1, 300), scheduler(0, 400),
                       scheduler(4, 500), trainer_status(2, 0.2, 600)) for p in maker.feed(m)]
    assert [(p.step, p.value) for p in out if p.tag == "pipeline/buffered"] == [(1, 16.0), (2, 4.0)]


def test_the_task_mix_stage_is_one_point_per_step():
    from seamlessflow.messages import ResourceStatus

    def scheduler(stage, at_ms):
        return ResourceStatus("x", "scheduler", "scheduler", [], "multiplexed", "active", 0,
                              {"buffered": 1.0, "stage": stage}, "default", "default", at_ms)
    maker = PointMaker()
    out = [p for m in (scheduler(0, 100), trainer_status(1, 0.1, 300), scheduler(1, 400),
                       trainer_status(2, 0.2, 600)) for p in maker.feed(m)]
    assert [(p.step, p.value) for p in out if p.tag == "pipeline/stage"] == [(1, 0.0), (2, 1.0)]


def test_only_the_newest_versions_steps_are_remembered(monkeypatch):
    monkeypatch.setattr("seamlessflow.tracking.points.VERSIONS_KEPT", 3)
    maker = PointMaker()
    for version in range(1, 7):
        maker.feed(weights(version=version, step=10 * version, at_ms=1000 * version))
    assert maker.version_steps == {4: 40, 5: 50, 6: 60}
    assert tags(maker.feed(eval_result(eval_json(5, 0.5, 0.3, 17.0)), now_s=0.0))[("eval/accuracy", 50)] == 0.5

"""Stages of the task mix (SRPO's two stages): the published mix switches when the stage's end holds, shares
are counted within a stage, and a manager rebuilt from the tasks topic resumes in the stage it was in."""

import json

import pytest
from pydantic import ValidationError

from seamlessflow.messages import Trajectory
from seamlessflow.scheduler.manager import RolloutManager, task_set
from seamlessflow.scheduler.options import ManagerOptions

SOURCES = [{"name": "math", "demo_count": 4}, {"name": "code", "kind": "code", "demo_seed": 1, "demo_count": 4}]


def staged(until: dict, max_in_flight: int = 4) -> RolloutManager:
    stages = [{"name": "math", "weights": {"math": 1}, "until": until},
              {"name": "math+code", "weights": {"math": 1, "code": 1}}]
    opts = ManagerOptions(group_size=2, max_in_flight=max_in_flight, sources=SOURCES, stages=stages)
    return RolloutManager(opts, task_set(opts), "default", "default", 100, 100, lambda: 0.0)


def publish(m: RolloutManager) -> list:
    tasks = m.next_tasks(0)
    for task in tasks:
        m.on_task(task)
    return tasks


def finish(m: RolloutManager, task, rewards=(1.0, 0.0), generated=3) -> None:
    for n, reward in enumerate(rewards):
        m.on_trajectory(Trajectory(f"{task.task_id}/{n}", f"{task.task_id}/{n}", 0, task.group_id, "t", "default",
                                   "default", [1] * (generated + 1), [0] + [1] * generated, [0.0] * (generated + 1),
                                   [-1] + [0] * generated, reward, "done", 1, 0, 0))


def sources_of(tasks) -> list[str]:
    return [json.loads(t.payload_json)["task_source"] for t in tasks]


def test_the_mix_switches_at_the_step_the_first_stage_ends():
    m = staged({"step": 3})
    first = publish(m)
    assert sources_of(first) == ["math"] * 4 and {json.loads(t.payload_json)["stage"] for t in first} == {0}
    _finish_all(m)
    assert not m.advance_stage(step=2, version=2) and sources_of(publish(m)) == ["math"] * 4
    _finish_all(m)
    assert m.advance_stage(step=3, version=3)
    second = publish(m)
    # shares counted within the stage: code is not owed the 8 math groups of stage 1
    assert sources_of(second) == ["math", "code", "math", "code"]
    assert {json.loads(t.payload_json)["stage"] for t in second} == {1}
    assert m.figures()["stage"] == 1


def _finish_all(m: RolloutManager) -> None:
    """Every open group finished, successes and failures alternating (a group with signal)."""
    for group_id, group in list(m.groups.items()):
        if len(group.sessions) < group.size:
            task_id = group_id.removeprefix("default.")
            for n, reward in enumerate([1.0, 0.0] * group.size):
                m.on_trajectory(Trajectory(f"{task_id}/{n}", f"{task_id}/{n}", 0, group_id, "t", "default",
                                           "default", [1, 2], [0, 1], [0.0, 0.0], [-1, 0], reward, "done", 1, 0, 0))


def test_a_metric_threshold_ends_a_stage_once_the_recent_figures_cross_it():
    m = staged({"metric": "source.math.recent_reward", "above": 0.6})
    tasks = publish(m)
    for task in tasks:
        finish(m, task, rewards=(1.0, 0.0))  # mean 0.5
    assert not m.advance_stage(0, 0)
    assert m.figures()["source.math.recent_reward"] == pytest.approx(0.5)
    assert m.figures()["source.math.recent_length"] == pytest.approx(3.0)
    for task in publish(m):
        finish(m, task, rewards=(1.0, 1.0))  # the window's mean is now 0.75
    assert m.advance_stage(0, 0) and sources_of(publish(m)) == ["math", "code", "math", "code"]


def test_a_rebuilt_manager_resumes_in_the_stage_it_had_published_in():
    first, history = staged({"step": 1}), []
    history += publish(first)
    _finish_all(first)
    first.advance_stage(1, 1)
    history += publish(first)  # stage 2: math, code, math, code
    restarted = staged({"step": 1})
    for task in history:  # the tasks topic, folded on rebuild
        restarted.on_task(task)
    for m in (first, restarted):
        _finish_all(m)
    assert restarted.stages.current == 1
    assert [t.task_id for t in restarted.next_tasks(0)] == [t.task_id for t in first.next_tasks(0)]


def test_bad_stage_configs_are_refused_with_a_reason():
    def options(stages):
        return ManagerOptions(sources=SOURCES, stages=stages)
    with pytest.raises(ValueError, match="unknown sources"):
        RolloutManager(options([{"name": "a", "weights": {"chemistry": 1}}]), [], "d", "d", 1, 1, lambda: 0.0)
    with pytest.raises(ValueError, match="needs `until`"):
        RolloutManager(options([{"name": "a", "weights": {"math": 1}}, {"name": "b", "weights": {"code": 1}}]),
                       [], "d", "d", 1, 1, lambda: 0.0)
    with pytest.raises(ValidationError, match="exactly one of above / below"):
        options([{"name": "a", "weights": {"math": 1}, "until": {"metric": "recent_reward"}}])


def test_the_srpo_example_config_runs_math_then_math_and_code_with_the_code_tasks_payload():
    from pathlib import Path

    import yaml

    from seamlessflow.config import Settings
    from seamlessflow.scheduler.options import ManagerOptions

    root = Path(__file__).resolve().parents[2]
    settings = Settings.model_validate(yaml.safe_load((root / "infra/examples/srpo-stages.yaml").read_text()))
    options = ManagerOptions.from_settings(settings)
    options = options.model_copy(update={"sources": [s.model_copy(update={"source": str(root / s.source)})
                                                     if s.source != "demo" else s for s in options.sources]})
    m = RolloutManager(options, task_set(options), "default", "default", 8, 4, lambda: 0.0)
    assert set(sources_of(publish(m))) == {"math"}
    _finish_all(m)
    m.advance_stage(step=200, version=0)
    second = publish(m)
    code = next(json.loads(t.payload_json) for t in second if t.kind == "code")
    assert set(sources_of(second)) == {"math", "code"} and {"function", "tests"} <= set(code)

"""What the dashboard's endpoints answer from the records it read (pure: records fed by hand)."""

import time

from seamlessflow.dashboard.state import DashboardState
from seamlessflow.testing.dashboard_records import sessions, switching_rollout
from seamlessflow.testing.tracking_records import eval_json, trainer_status, weights
from seamlessflow.tracking.follow import Incoming
from seamlessflow.tracking.points import PointMaker, eval_result


def fed(messages, decode=None) -> DashboardState:
    state = DashboardState("default", "default", max_sessions=10, decode=decode)
    for m in messages:
        state.feed(Incoming("t", getattr(m, "created_at_ms", 0), m))
    return state


def test_curves_resources_and_eval():
    state = fed([trainer_status(0, 0.0, 1000), trainer_status(1, 0.25, 2000, version=0), weights(1, 1, 2100),
                 eval_result(eval_json(1, 0.5, 0.4, 12.0)), trainer_status(2, 0.5, 3000, version=1)])
    curves = state.curves_json()["curves"]
    assert curves["train/reward_mean"] == [(1, 0.25), (2, 0.5)]
    assert curves["eval/accuracy"] == [(1, 0.5)]
    overview = state.overview()
    assert [(r["id"], r["capability_tags"], r["weight_version"]) for r in overview["resources"]] == [
        ("trainer-0", ["train"], 1)
    ]
    assert overview["evals"] == {"1": {"accuracy": 0.5, "mean_reward": 0.4, "mean_length": 12.0}}


def test_an_eval_waits_for_its_versions_step_then_is_plotted_at_the_version():
    state = fed([eval_result(eval_json(1, 0.5, 0.4, 12.0)), weights(1, 4, 2100),  # read before its weights record
                 eval_result(eval_json(7, 0.7, 0.4, 12.0))])  # no weights record for version 7
    assert state.curves_json()["curves"]["eval/accuracy"] == [(4, 0.5)]
    state.release_overdue(time.monotonic() + state.maker.eval_wait_s)
    assert state.curves_json()["curves"]["eval/accuracy"] == [(4, 0.5), (7, 0.7)]


def test_timeline_shows_the_role_switches():
    timeline = fed(switching_rollout(1000)).timeline_json()
    assert [(i["kind"], i["start"], i["end"]) for i in timeline["intervals"]] == [
        ("rollout", 0.0, 3.0), ("train", 3.0, 6.0), ("rollout", 6.0, 8.0)]
    assert [(s["from"], s["to"]) for s in timeline["switches"]] == [("rollout", "train"), ("train", "rollout")]


def test_a_session_as_replay_shows_it_with_its_fork_and_text():
    state = fed(sessions(1000), decode=lambda ids: "".join(chr(96 + i) for i in ids))
    listed = {s["session_id"]: s for s in state.sessions_json()}
    assert listed["forked"]["versions"] == [1, 2] and listed["forked"]["reward"] == 0.5
    detail = state.session_detail("forked")
    assert [t["outcome"] for t in detail["turns"]] == ["start", "fork"] and detail["forks"] == 1
    assert detail["turns"][1]["known"] == 2 and detail["turns"][1]["fed"] == [7]
    assert detail["turns"][1]["fed_text"] == "g" and detail["turns"][1]["generated_text"] == ["h", "i"]
    assert state.session_detail("nope") is None


def test_memory_is_bounded_and_other_runs_are_left_out():
    state = DashboardState("default", "default", max_sessions=1)
    for m in sessions(1000) + [trainer_status(5, 0.9, 1000, run="other")]:
        state.feed(Incoming("t", 0, m))
    assert [s["session_id"] for s in state.sessions_json()] == ["forked"]
    assert state.overview()["resources"] == []


def test_an_adapters_stack_shows_each_teams_reward_and_eval_curves(tmp_path):
    from seamlessflow.config import Settings
    from seamlessflow.testing.tracking_records import adapter_stack

    maker = PointMaker.for_settings(adapter_stack(Settings(data_dir=tmp_path)))
    state = DashboardState("default", "default", maker=maker)
    red, blue = "trainer-0-red", "trainer-0-blue"
    records = [trainer_status(0, 0.0, 1000, resource_id=red), trainer_status(0, 0.0, 1000, resource_id=blue),
               trainer_status(1, 0.1, 2000, resource_id=red), trainer_status(1, 0.6, 2000, resource_id=blue),
               weights(1, 1, 2100, trainer_id=red, adapter="red-lora"),
               eval_result(eval_json(1, 0.3, 0.3, 10.0, team="red")),
               eval_result(eval_json(1, 0.9, 0.9, 10.0, team="blue")),  # before blue's v1: waits for its step
               trainer_status(2, 0.2, 3000, version=1, resource_id=red),
               trainer_status(3, 0.7, 3000, resource_id=blue),
               trainer_status(4, 0.8, 4000, version=1, resource_id=blue)]  # blue's v1 began at its step 4
    for m in records:
        state.feed(Incoming("t", getattr(m, "created_at_ms", 0), m))
    curves = state.curves_json()
    assert curves["curves"]["train/red/reward_mean"] == [(1, 0.1), (2, 0.2)]
    assert curves["curves"]["train/blue/reward_mean"] == [(1, 0.6), (3, 0.7), (4, 0.8)]
    assert curves["curves"]["eval/red/accuracy"] == [(1, 0.3)] and curves["curves"]["eval/blue/accuracy"] == [(4, 0.9)]
    assert "train/reward_mean" not in curves["curves"] and "eval/accuracy" not in curves["curves"]
    assert curves["steps"] == {"red": 2, "blue": 4}
    overview = state.overview()
    assert {r["id"]: r.get("adapter_team") for r in overview["resources"]} == {red: "red", blue: "blue"}
    assert overview["evals"] == {} and overview["team_evals"] == {
        "red": {"1": {"accuracy": 0.3, "mean_reward": 0.3, "mean_length": 10.0}},
        "blue": {"1": {"accuracy": 0.9, "mean_reward": 0.9, "mean_length": 10.0}}}


def with_mismatch(status, abs_mean, stale_abs_mean):
    """A trainer heartbeat with its step's train-inference mismatch figures (#61)."""
    status.figures.update({"mismatch_abs_mean": abs_mean, "mismatch_kl": abs_mean ** 2 / 2, "mismatch_tokens": 64.0,
                           "stale_abs_mean": stale_abs_mean, "stale_tokens": 32.0, "masked_tokens": 0.0})
    return status


def test_the_mismatch_curves_one_per_trainer_with_the_warning_threshold(tmp_path):
    base = fed([with_mismatch(trainer_status(1, 0.1, 1000), 0.001, 0.05),
                with_mismatch(trainer_status(2, 0.2, 2000), 0.002, 0.07)])
    curves = base.curves_json()
    assert curves["curves"]["train/mismatch_abs_mean"] == [(1, 0.001), (2, 0.002)]
    assert curves["curves"]["train/stale_abs_mean"] == [(1, 0.05), (2, 0.07)]
    assert curves["curves"]["train/mismatch_kl"] == [(1, 0.001 ** 2 / 2), (2, 0.002 ** 2 / 2)]
    assert curves["mismatch_warn"] is None  # the threshold not known: no line

    from seamlessflow.config import Settings
    from seamlessflow.testing.tracking_records import adapter_stack

    maker = PointMaker.for_settings(adapter_stack(Settings(data_dir=tmp_path)))  # red and blue train their adapters
    state = DashboardState("default", "default", maker=maker, mismatch_warn=0.05)
    for m in [with_mismatch(trainer_status(1, 0.1, 1000, resource_id="trainer-0-red"), 0.001, 0.04),
              with_mismatch(trainer_status(3, 0.6, 1000, resource_id="trainer-0-blue"), 0.3, 0.5)]:
        state.feed(Incoming("t", m.created_at_ms, m))
    curves = state.curves_json()
    assert curves["curves"]["train/red/mismatch_abs_mean"] == [(1, 0.001)]
    assert curves["curves"]["train/blue/mismatch_abs_mean"] == [(3, 0.3)]  # blue's engines and trainer differ
    assert curves["curves"]["train/blue/stale_abs_mean"] == [(3, 0.5)]
    assert curves["mismatch_warn"] == 0.05


def test_the_dashboard_reads_the_threshold_as_the_trainer_does(tmp_path):
    import pytest

    from seamlessflow.config import Settings
    from seamlessflow.dashboard.app import mismatch_warn
    from seamlessflow.trainer.options import TrainerOptions

    if "mismatch_warn" not in TrainerOptions.model_fields:
        pytest.skip("trainer.mismatch_warn is not an option of this checkout's trainer yet")
    assert mismatch_warn(Settings(data_dir=tmp_path)) == TrainerOptions().mismatch_warn
    assert mismatch_warn(Settings(data_dir=tmp_path, trainer={"mismatch_warn": 0.2})) == 0.2
    assert mismatch_warn(Settings(data_dir=tmp_path, trainer={"mismatch_warn": "high"})) is None  # the trainer says why

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


def adapter_maker(**options):
    """An adapters stack's maker: red and blue each train their adapter (`trainer-0-red`, `red-lora`, ...)."""
    from seamlessflow.trainer.adapter_trainers import AdapterTrainer

    trainers = [AdapterTrainer(team, f"{team}-lora", f"trainer-0-{team}") for team in ("red", "blue")]
    maker = PointMaker.with_trainers("default", "default", trainers)
    for name, value in options.items():
        setattr(maker, name, value)
    return maker


def test_each_adapter_trainer_has_curves_of_its_own_at_its_own_steps():
    from seamlessflow.messages import ResourceStatus

    red, blue = "trainer-0-red", "trainer-0-blue"
    scheduler = ResourceStatus("x", "scheduler", "scheduler", [], "multiplexed", "active", 0, {"buffered": 3.0},
                               "default", "default", 50)
    records = [scheduler, rollout_status("rollout-0", 40.0, 100),
               trainer_status(0, 0.0, 1000, resource_id=red), trainer_status(0, 0.0, 1000, resource_id=blue),
               trainer_status(1, 0.1, 2000, resource_id=red), trainer_status(5, 0.7, 2100, resource_id=blue),
               weights(1, 1, 2200, trainer_id=red, adapter="red-lora"),
               weights(1, 5, 2300, trainer_id=blue, adapter="blue-lora"),
               trainer_status(2, 0.2, 5000, version=1, resource_id=red),
               trainer_status(6, 0.8, 3100, version=1, resource_id=blue)]
    maker = adapter_maker()
    out = [p for m in records for p in maker.feed(m, now_s=0.0)]
    curves: dict[str, list] = {}
    for p in out:
        curves.setdefault(p.tag, []).append((p.step, p.value))
    assert curves["train/red/reward_mean"] == [(1, 0.1), (2, 0.2)]
    assert curves["train/blue/reward_mean"] == [(5, 0.7), (6, 0.8)]
    assert curves["train/red/version"] == [(1, 1.0)] and curves["train/blue/version"] == [(5, 1.0)]
    assert curves["train/red/weight_version"] == [(1, 0.0), (2, 1.0)]
    assert curves["throughput/red/steps_per_min"] == [(2, 60.0 / 3)]  # red's steps 3 s apart, not blue's
    assert curves["throughput/blue/steps_per_min"] == [(6, 60.0 / 1)]
    # the engines serve every team: the throughput since each team's previous step, at that team's step
    assert curves["throughput/red/rollout_tokens_per_s"] == [(1, 40.0)]
    assert curves["throughput/blue/rollout_tokens_per_s"] == [(5, 40.0)]
    assert curves["pipeline/red/buffered"] == [(1, 3.0), (2, 3.0)]
    assert not [tag for tag in curves if tag.count("/") == 1]  # nothing on the base's tags
    assert maker.team_steps() == {"red": 2, "blue": 6} and maker.step == 6
    # evals of each team's adapter, interleaved, each at its team's step of that version
    assert tags(maker.feed(eval_result(eval_json(1, 0.5, 0.5, 9.0, team="blue")), now_s=0.0)) == {
        ("eval/blue/accuracy", 5): 0.5, ("eval/blue/mean_reward", 5): 0.5, ("eval/blue/mean_length", 5): 9.0}
    assert tags(maker.feed(eval_result(eval_json(1, 0.25, 0.3, 9.0, team="red")), now_s=0.0))[
        ("eval/red/accuracy", 1)] == 0.25


def test_a_teams_eval_waits_for_its_own_teams_version_not_anothers():
    red, blue = "trainer-0-red", "trainer-0-blue"
    maker = adapter_maker(eval_wait_s=10.0)
    maker.feed(weights(2, 8, 1000, trainer_id=blue, adapter="blue-lora"), now_s=0.0)  # blue's v2, not red's
    assert maker.feed(eval_result(eval_json(2, 0.6, 0.6, 9.0, team="red")), now_s=0.0) == []  # waits for red's v2
    assert tags(maker.feed(eval_result(eval_json(2, 0.9, 0.9, 9.0, team="blue")), now_s=0.0))[
        ("eval/blue/accuracy", 8)] == 0.9
    maker.feed(trainer_status(3, 0.1, 1000, version=1, resource_id=red), now_s=1.0)
    released = tags(maker.feed(trainer_status(4, 0.2, 2000, version=2, resource_id=red), now_s=1.0))
    assert released[("eval/red/accuracy", 4)] == 0.6 and ("eval/blue/accuracy", 4) not in released
    assert maker.feed(eval_result(eval_json(3, 0.7, 0.7, 9.0, team="red")), now_s=2.0) == []
    assert tags(maker.overdue(now_s=12.0)) == {("eval/red/accuracy", 3): 0.7, ("eval/red/mean_reward", 3): 0.7,
                                               ("eval/red/mean_length", 3): 9.0}  # at the version once it waited


def test_a_version_is_known_by_its_adapter_when_its_trainer_is_not_and_an_unknown_adapter_plots_nothing():
    maker = adapter_maker()
    assert tags(maker.feed(weights(3, 12, 1000, trainer_id="elsewhere", adapter="red-lora"))) == {
        ("train/red/version", 12): 3.0}
    assert maker.feed(weights(4, 13, 1000, trainer_id="elsewhere", adapter="other-lora")) == []
    assert maker.version_steps == {}  # the base's versions: none of these


def test_the_base_stack_plots_as_before_whatever_the_records_teams():
    maker = PointMaker("default", "default")
    out = [p for m in (trainer_status(1, 0.1, 1000), weights(1, 1, 1100), trainer_status(2, 0.2, 2000, version=1))
           for p in maker.feed(m, now_s=0.0)]
    out += maker.feed(eval_result(eval_json(1, 0.5, 0.5, 9.0, team="red")), now_s=0.0)  # `eval.team: red`
    assert {p.tag for p in out} == {"train/reward_mean", "train/loss", "train/tokens_trained", "train/step_time_s",
                                    "train/weight_version", "train/version", "throughput/steps_per_min",
                                    "throughput/trained_tokens_per_s", "eval/accuracy", "eval/mean_reward",
                                    "eval/mean_length"}
    assert maker.teams == [] and maker.team_steps() == {}


def test_the_maker_learns_the_adapter_trainers_from_the_settings(tmp_path):
    from seamlessflow.config import Settings
    from seamlessflow.testing.tracking_records import adapter_stack

    maker = PointMaker.for_settings(adapter_stack(Settings(data_dir=tmp_path, trainer={"resource_id": "t"})))
    assert maker.trainers == {"t-red": "red", "t-blue": "blue"}  # TrainerOptions.for_adapter's ids; green: none
    assert maker.adapters == {"red-lora": "red", "blue-lora": "blue"}
    assert PointMaker.for_settings(Settings(data_dir=tmp_path)).teams == []


def with_mismatch(status, **figures):
    """A trainer heartbeat carrying the train-inference mismatch figures of its step (#61)."""
    status.figures.update({"mismatch_abs_mean": 0.002, "mismatch_abs_max": 0.03, "mismatch_kl": 1e-5,
                           "mismatch_share": 0.0, "mismatch_tokens": 96.0, "stale_abs_mean": 0.08,
                           "stale_abs_max": 0.9, "stale_kl": 0.004, "stale_share": 0.2, "stale_tokens": 160.0,
                           "masked_tokens": 2.0, **figures})
    return status


def test_the_mismatch_figures_are_tracked_per_step_and_per_teams_trainer():
    maker = PointMaker("default", "default")
    out = tags(maker.feed(with_mismatch(trainer_status(1, 0.1, 1000))))
    out |= tags(maker.feed(with_mismatch(trainer_status(2, 0.2, 2000), mismatch_abs_mean=float("nan"))))
    assert out[("train/mismatch_abs_mean", 1)] == 0.002 and out[("train/stale_abs_mean", 2)] == 0.08
    assert out[("train/mismatch_kl", 1)] == 1e-5 and out[("train/masked_tokens", 1)] == 2.0
    assert ("train/mismatch_abs_mean", 2) not in out  # NaN: not defined
    # a step with no token of an older version: the trainer says 0 for each stale figure, which is no measure
    out |= tags(maker.feed(with_mismatch(trainer_status(3, 0.3, 3000), stale_abs_mean=0.0, stale_abs_max=0.0,
                                         stale_kl=0.0, stale_share=0.0, stale_tokens=0.0)))
    assert [k for k in out if k[1] == 3 and "stale" in k[0]] == [("train/stale_tokens", 3)]
    assert out[("train/mismatch_abs_mean", 3)] == 0.002
    assert {tag for tag, _ in out if "mismatch" in tag or "stale" in tag} == {
        f"train/{kind}_{figure}" for kind in ("mismatch", "stale")
        for figure in ("abs_mean", "abs_max", "kl", "share", "tokens")}
    red = tags(adapter_maker().feed(with_mismatch(trainer_status(3, 0.1, 1000, resource_id="trainer-0-red"))))
    assert red[("train/red/mismatch_abs_mean", 3)] == 0.002 and red[("train/red/stale_kl", 3)] == 0.004


def test_the_teachers_kl_is_tracked_for_steps_that_distilled_only():
    maker = PointMaker("default", "default")
    rl = trainer_status(1, 0.1, 1000)
    rl.figures.update({"teacher_kl": 0.0, "taught_tokens": 0.0})  # an RL step says 0: no measure
    taught = trainer_status(2, 0.2, 2000)
    taught.figures.update({"teacher_kl": 0.35, "taught_tokens": 40.0})
    out = tags(maker.feed(rl)) | tags(maker.feed(taught))
    assert out[("train/teacher_kl", 2)] == 0.35 and out[("train/taught_tokens", 2)] == 40.0
    assert ("train/teacher_kl", 1) not in out and ("train/taught_tokens", 1) not in out

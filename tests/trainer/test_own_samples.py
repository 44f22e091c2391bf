"""Which trajectories a trainer trains (pure): its own policy's, never an evaluation pass's; the rest counted."""

from dataclasses import replace

from seamlessflow.core.evaluation import EVAL_GROUP_PREFIX
from seamlessflow.messages import Trajectory
from seamlessflow.testing.samples import SAMPLES
from seamlessflow.trainer.own_samples import OwnSamples

BASE = replace(next(s for s in SAMPLES if isinstance(s, Trajectory)), team="red")


def test_the_base_trainer_passes_over_adapter_samples_and_counts_them():
    own = OwnSamples(None, None)
    assert not own.passes_over(BASE)  # a record before `adapter`, or the base's: the base's own
    assert own.passes_over(replace(BASE, adapter="red-lora"))
    assert own.figures() == {"other_adapters_skipped": 1.0}


def test_an_adapter_trainer_trains_only_its_teams_samples_of_its_adapter():
    own = OwnSamples("red-lora", "red")
    assert not own.passes_over(replace(BASE, adapter="red-lora"))
    assert own.passes_over(replace(BASE, team="blue", adapter="blue-lora"))
    assert own.passes_over(BASE)  # red's team, but sampled by the base
    assert own.figures() == {"other_adapters_skipped": 1.0, "other_teams_skipped": 1.0}


def test_evaluation_sessions_are_never_trained_nor_counted_as_skipped():
    own = OwnSamples(None, None)
    assert own.passes_over(replace(BASE, group_id=f"{EVAL_GROUP_PREFIX}g1"))
    assert own.figures() == {"other_adapters_skipped": 0.0}

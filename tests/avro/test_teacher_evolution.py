"""Trajectory's teacher fields (per-token teacher logprobs, the teacher's name and version): a compatible evolution
read both ways (schemas/previous/trajectory.v4.avsc). A record written before them reads as not taught."""

import math

import pytest

from seamlessflow.messages import Trajectory
from seamlessflow.testing.samples import SAMPLES, check_added_field

TRAJECTORY = next(s for s in SAMPLES if isinstance(s, Trajectory))


@pytest.mark.parametrize(("field", "value", "default"), [
    ("teacher_logprobs", [0.0, 0.0, 0.0, -0.25, -1.5], []), ("teacher", "calc-teacher", None),
    ("teacher_version", 7, -1),
])
def test_trajectory_teacher_fields_evolve_both_ways(codec, field, value, default):
    check_added_field(codec, TRAJECTORY, 4, field, value, default)


def test_a_token_the_teacher_gave_no_logprob_for_round_trips_as_nan(codec):
    taught = TRAJECTORY.__class__(**{**vars(TRAJECTORY), "teacher_logprobs": [0.0, 0.0, 0.0, float("nan"), -1.0]})
    back = codec.decode(codec.encode(taught, "t"))
    assert math.isnan(back.teacher_logprobs[3]) and back.teacher_logprobs[4] == -1.0

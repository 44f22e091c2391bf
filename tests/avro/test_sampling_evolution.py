"""TokenIO's sampling fields (temperature, top_p, top_k, min_p, logprob_space, invalid_logprobs) and Trajectory's
adapter, per-token temperatures and masked-token count: compatible evolutions read both ways
(schemas/previous/token_io.v5.avsc, schemas/previous/trajectory.v3.avsc). A record written before them reads
with the defaults that describe it: raw logprobs at temperature 1, the base model, nothing masked."""

import pytest

from seamlessflow.messages import TokenIO, Trajectory
from seamlessflow.testing.samples import SAMPLES, check_added_field

TOKEN_IO = next(s for s in SAMPLES if isinstance(s, TokenIO))
TRAJECTORY = next(s for s in SAMPLES if isinstance(s, Trajectory))


@pytest.mark.parametrize(("field", "value", "default"), [
    ("temperature", 0.5, 1.0), ("top_p", 0.875, 1.0), ("top_k", 40, 0), ("min_p", 0.125, 0.0),
    ("logprob_space", "processed", "raw"), ("invalid_logprobs", 2, 0),
])
def test_token_io_sampling_fields_evolve_both_ways(codec, field, value, default):
    check_added_field(codec, TOKEN_IO, 5, field, value, default)


@pytest.mark.parametrize(("field", "value", "default"), [
    ("adapter", "red-lora", None), ("temperatures", [1.0, 1.0, 1.0, 0.5, 0.5], []), ("masked_tokens", 1, 0),
])
def test_trajectory_provenance_fields_evolve_both_ways(codec, field, value, default):
    check_added_field(codec, TRAJECTORY, 3, field, value, default)

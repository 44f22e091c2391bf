"""The mismatch monitor's sums (pure), and which tokens count as the trainer's own."""

import math

import pytest
import torch

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.core.behaviour import behaviour_of
from seamlessflow.core.mismatch import drift, split_by_version, suspected_cause


def test_drift_sums_mean_max_share_and_the_k3_kl_estimate():
    train = torch.tensor([[-1.0, -2.0, -0.5, -3.0]])
    behaviour = torch.tensor([[-1.0, -2.5, -0.45, -9.0]])
    mask = torch.tensor([[0, 1, 1, 1]])
    d = drift(train, behaviour, mask)
    deltas = [0.5, -0.05, 6.0]
    assert d.tokens == 3 and d.abs_sum == pytest.approx(6.55) and d.abs_max == pytest.approx(6.0) and d.far == 2
    assert d.kl_sum == pytest.approx(sum(math.exp(x) - x - 1 for x in deltas), rel=1e-5)
    figures = d.figures("mismatch")
    assert figures["mismatch_abs_mean"] == pytest.approx(6.55 / 3) and figures["mismatch_share"] == pytest.approx(2 / 3)


def test_own_tokens_are_those_of_the_version_held_and_older_ones_are_staleness():
    train, behaviour = torch.zeros(1, 5), torch.tensor([[0.0, -0.1, -0.2, -0.3, -0.4]])
    versions, mask = torch.tensor([[-1, 3, 3, 2, 1]]), torch.tensor([[0, 1, 1, 1, 1]])
    own, stale = split_by_version(train, behaviour, mask, versions, held=3)
    assert (own.tokens, stale.tokens) == (2, 2) and own.abs_max == pytest.approx(0.2)


def test_no_tokens_no_figures_but_zero_counts():
    assert drift(torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2)).figures("stale")["stale_tokens"] == 0


def test_the_suspected_cause_reads_the_pattern():
    assert "other weights" in suspected_cause({"mismatch_share": 0.9, "mismatch_abs_mean": 2.0}, False)
    assert "16-bit" in suspected_cause({"mismatch_share": 0.1, "mismatch_abs_mean": 0.08}, True)
    assert "raw logprobs" in suspected_cause({"mismatch_share": 0.1, "mismatch_abs_mean": 0.08}, False)


def test_nan_and_greedy_tokens_are_masked_counted_and_given_finite_stand_ins():
    sample = TrajectorySample("s", "g", "t", (1, 2, 3, 4), (0, 1, 1, 1), (0.0, math.nan, -0.5, -0.2), (-1, 0, 0, 0),
                              1.0, temperatures=(1.0, 0.7, 0.7, 0.0))
    seen = behaviour_of(sample)
    assert seen.masked == 2 and seen.loss_mask == (0, 0, 1, 0)
    assert seen.logprobs == (0.0, 0.0, -0.5, -0.2) and seen.temperatures == (1.0, 0.7, 0.7, 1.0)
    plain = TrajectorySample("p", "g", "t", (1, 2), (0, 1), (0.0, -0.3), (-1, 0), 0.0)
    assert behaviour_of(plain).masked == 0 and behaviour_of(plain).temperatures is None


def test_an_infinite_logprob_of_an_older_record_is_masked_too():
    sample = TrajectorySample("o", "g", "t", (1, 2, 3), (0, 1, 1), (0.0, -math.inf, -0.5), (-1, 0, 0), 1.0)
    seen = behaviour_of(sample)
    assert seen.masked == 1 and seen.loss_mask == (0, 0, 1) and seen.logprobs == (0.0, 0.0, -0.5)

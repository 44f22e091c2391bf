"""What the trainer may train of a sequence: the generated tokens whose behaviour distribution it can reproduce.

Why: a PPO ratio or an importance weight compares the trainer's logprob of a token with the logprob the engine
recorded for it. A token without one (NaN: the engine gave null, -inf or a count that did not match its tokens,
`proxy.capture`) or sampled greedily (temperature 0: no distribution an importance ratio can use,
`core.sampling`) has no such number, and any stand-in (0.0 is probability 1) would be trusted as a real one.
Such tokens are masked out of the loss and counted; the tensors get finite stand-ins that the mask zeroes.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from seamlessflow.core.batching import TrajectorySample
from seamlessflow.core.sampling import GREEDY_BELOW


@dataclass(frozen=True)
class Behaviour:
    """One sequence as the loss reads it: equally long tuples, and how many generated tokens were masked."""

    loss_mask: tuple[int, ...]
    logprobs: tuple[float, ...]  # finite everywhere (0.0 where masked)
    temperatures: tuple[float, ...] | None  # None: 1.0 everywhere; greedy positions read 1.0 (masked anyway)
    masked: int


def behaviour_of(sample: TrajectorySample) -> Behaviour:
    temperatures = sample.temperatures or None
    bad = [bool(m) and (math.isnan(lp) or (temperatures is not None and temperatures[t] < GREEDY_BELOW))
           for t, (m, lp) in enumerate(zip(sample.loss_mask, sample.logprobs, strict=True))]
    if not any(bad) and not any(math.isnan(lp) for lp in sample.logprobs):
        return Behaviour(sample.loss_mask, sample.logprobs, temperatures, 0)
    mask = tuple(0 if b else m for m, b in zip(sample.loss_mask, bad, strict=True))
    logprobs = tuple(0.0 if math.isnan(lp) else lp for lp in sample.logprobs)
    if temperatures is not None:
        temperatures = tuple(1.0 if t < GREEDY_BELOW else t for t in temperatures)
    return Behaviour(mask, logprobs, temperatures, sum(bad))

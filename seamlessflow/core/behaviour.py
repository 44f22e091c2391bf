"""What the trainer may train of a sequence: the generated tokens whose behaviour distribution it can reproduce.

Why: a PPO ratio or an importance weight compares the trainer's logprob of a token with the logprob the engine
recorded for it. Some tokens have no such number: a NaN (the engine gave null, -inf or a count that did not match
its tokens, `proxy.capture`), an infinity in a record written before that, or a token sampled greedily
(temperature 0: no distribution an importance ratio can use, `core.sampling`). Any stand-in would be trusted as a
real one (0.0 is probability 1), so such tokens are masked out of the loss and counted; the tensors get finite
stand-ins that the mask zeroes.
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
    """The sample as the loss reads it. Asked of every sample more than once a step (its split, each micro-batch,
    the tree's planning): most samples have nothing to mask, which two passes in C tell (a NaN or an infinity makes
    the sum no finite number)."""
    temperatures = sample.temperatures or None
    if math.isfinite(sum(sample.logprobs)) and (temperatures is None or min(temperatures) >= GREEDY_BELOW):
        return Behaviour(sample.loss_mask, sample.logprobs, temperatures, 0)
    bad = [bool(m) and (not math.isfinite(lp) or (temperatures is not None and temperatures[t] < GREEDY_BELOW))
           for t, (m, lp) in enumerate(zip(sample.loss_mask, sample.logprobs, strict=True))]
    mask = tuple(0 if b else m for m, b in zip(sample.loss_mask, bad, strict=True))
    logprobs = tuple(lp if math.isfinite(lp) else 0.0 for lp in sample.logprobs)
    if temperatures is not None:
        temperatures = tuple(1.0 if t < GREEDY_BELOW else t for t in temperatures)
    return Behaviour(mask, logprobs, temperatures, sum(bad))

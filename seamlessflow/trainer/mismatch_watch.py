"""A warning in the trainer's log when its own-version logprobs drift from the engines' (`core.mismatch`).

Why a log line and not only a figure: the figures are on the heartbeat, in tracking and on the dashboard for
whoever looks; a run that collapses overnight should also say, in the log read afterwards, when the mismatch
first crossed the line and what the trainer suspects. Said at the first crossing and then at most once every
`every_steps` steps while it lasts, so it never floods the log.
"""

from __future__ import annotations

import logging

import torch

from seamlessflow.core.mismatch import suspected_cause
from seamlessflow.trainer.model import training_dtype
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.policy_engine import StepMetrics

log = logging.getLogger("seamlessflow.trainer.mismatch")


class MismatchWatch:
    def __init__(self, threshold: float | None, half_precision: bool, every_steps: int = 50):
        self.threshold, self.half_precision, self.every_steps = threshold, half_precision, every_steps
        self._last_said: int | None = None

    @classmethod
    def of(cls, options: TrainerOptions) -> MismatchWatch:
        half = training_dtype(options.deepspeed_dict()) in (torch.bfloat16, torch.float16)
        return cls(options.mismatch_warn, half)

    def check(self, metrics: StepMetrics, step: int) -> bool:
        """Logs a warning when the step's own-version mismatch is above the threshold; True if it did."""
        figures = metrics.figures()
        over = self.threshold is not None and metrics.mismatch.tokens > 0 and \
            figures["mismatch_abs_mean"] > self.threshold
        if not over:
            self._last_said = None
            return False
        if self._last_said is not None and step - self._last_said < self.every_steps:
            return False
        self._last_said = step
        log.warning("step %d: train-inference mismatch %.3g mean |Δ logprob| over %d tokens of the version held "
                    "(max %.3g, KL %.3g, %.0f%% beyond 0.1; trainer.mismatch_warn %.3g): %s", step,
                    figures["mismatch_abs_mean"], int(metrics.mismatch.tokens), figures["mismatch_abs_max"],
                    figures["mismatch_kl"], 100 * figures["mismatch_share"], self.threshold,
                    suspected_cause(figures, self.half_precision))
        return True

"""The stack's one rule for sampling: every recorded logprob is of the distribution that sampled its token.

Why: PPO ratios and importance weights compare the trainer's logprob of a token with the behaviour policy's.
The engines run with processed logprobs (after temperature and truncation), so a token's recorded logprob is
of the distribution it was drawn from; the trainer reproduces that distribution in its forward. Temperature
it can reproduce exactly (logits / T, per token). Truncation (top_p, top_k, min_p) and penalties and biases
it does not, so an agent's own values for those are either overridden (the engine samples from the whole
tempered distribution; the agent is served, the setting counted) or refused (400 naming the setting).
Neutral values are always sent, so an engine's own defaults (a model's `generation_config.json` may set
top_p 0.8, top_k 20, a repetition penalty) never reshape what it samples from behind the trainer's back.

A greedy call (temperature 0) samples from no distribution an importance ratio can use: it is served and
recorded at temperature 0, and its tokens are never trained (`mask`), or refused.

Pure: plain values in, plain values out; the proxy maps `SamplingRefused` to its 400.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

GREEDY_BELOW = 1e-5  # vLLM's _SAMPLING_EPS: a temperature under it samples greedily
TRUNCATION: dict[str, float | int] = {"top_p": 1.0, "top_k": 0, "min_p": 0.0}  # the neutral value: off
PENALTIES: dict[str, float] = {"presence_penalty": 0.0, "frequency_penalty": 0.0, "repetition_penalty": 1.0}
BIASES = ("logit_bias", "bad_words", "allowed_token_ids")  # reshape the distribution; dropped when overridden


class AgentSetting(StrEnum):
    """What happens to an agent's own value of a setting the trainer cannot reproduce."""

    OVERRIDE = "override"  # the neutral value is sent instead; the call is served, the setting counted
    REFUSE = "refuse"  # 400 naming the setting


class GreedyCalls(StrEnum):
    MASK = "mask"  # served and recorded at temperature 0; its tokens are never trained
    REFUSE = "refuse"  # 400


class LogprobSpace(StrEnum):
    """What the engines' logprobs are: after every processor (vLLM's processed_logprobs) or before (raw)."""

    PROCESSED = "processed"
    RAW = "raw"


class SamplingRefused(ValueError):
    """A call's sampling setting the rule refuses; `setting` names the request's field."""

    def __init__(self, setting: str, message: str):
        super().__init__(message)
        self.setting = setting


@dataclass(frozen=True)
class Sampled:
    """How one call is sampled, as sent to the engine and recorded on its `TokenIO`."""

    temperature: float
    overridden: tuple[str, ...] = ()  # the agent's settings replaced by the rule
    logprob_space: LogprobSpace = LogprobSpace.PROCESSED

    @property
    def greedy(self) -> bool:
        return self.temperature < GREEDY_BELOW

    def upstream(self) -> dict[str, Any]:
        """The sampling fields of the engine's request: the temperature and every filter explicitly off."""
        return {"temperature": self.temperature, **TRUNCATION, **PENALTIES}


@dataclass(frozen=True)
class SamplingRule:
    """`rollout.sampling` as the core reads it (see `seamlessflow.model.sampling` for the help)."""

    temperature: float | None = None  # None: each call's own (1.0 when it sets none)
    truncation: AgentSetting = AgentSetting.OVERRIDE
    penalties: AgentSetting = AgentSetting.OVERRIDE
    greedy: GreedyCalls = GreedyCalls.MASK
    engine_logprobs: LogprobSpace = LogprobSpace.PROCESSED

    def apply(self, body: Mapping[str, Any]) -> Sampled:
        """How the call in ``body`` (chat or completions form) is sampled; SamplingRefused for a setting refused."""
        overridden = [*self._filters(body, TRUNCATION, self.truncation, "truncation"),
                      *self._filters(body, PENALTIES, self.penalties, "penalties"),
                      *self._biases(body)]
        asked = _temperature(body)
        temperature = asked if self.temperature is None else self.temperature
        if self.engine_logprobs is LogprobSpace.RAW:  # raw logprobs describe temperature 1 only
            temperature = 1.0
        if temperature != asked and "temperature" in body:
            overridden.append("temperature")
        if temperature < GREEDY_BELOW and self.greedy is GreedyCalls.REFUSE:
            raise SamplingRefused("temperature", "greedy calls (temperature 0) are refused here "
                                  "(rollout.sampling.greedy: refuse): sample at a temperature above 0")
        return Sampled(temperature, tuple(overridden), self.engine_logprobs)

    @staticmethod
    def _filters(body: Mapping[str, Any], neutral: Mapping[str, float | int], choice: AgentSetting,
                 key: str) -> list[str]:
        changed = [name for name, value in neutral.items() if not _is_neutral(body.get(name), value, name)]
        if changed and choice is AgentSetting.REFUSE:
            name = changed[0]
            raise SamplingRefused(name, f"'{name}' = {body[name]!r} is refused here (rollout.sampling.{key}: refuse): "
                                  "the trainer cannot reproduce it, so its tokens would be trained against a "
                                  f"distribution that did not sample them; leave '{name}' unset")
        return changed

    def _biases(self, body: Mapping[str, Any]) -> list[str]:
        present = [name for name in BIASES if body.get(name)]
        if present and self.penalties is AgentSetting.REFUSE:
            raise SamplingRefused(present[0], f"'{present[0]}' is refused here (rollout.sampling.penalties: refuse): "
                                  "it reshapes the distribution the trainer reproduces")
        return present


def _temperature(body: Mapping[str, Any]) -> float:
    value = body.get("temperature")
    if value is None:
        return 1.0
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise SamplingRefused("temperature", "'temperature' must be a number >= 0")
    return float(value)


def _is_neutral(value: Any, neutral: float | int, name: str) -> bool:
    if value is None:
        return True
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise SamplingRefused(name, f"'{name}' must be a number")
    return value == neutral or (name == "top_k" and value == -1)  # vLLM reads top_k -1 as off too


def upstream_sampling(body: Mapping[str, Any], sampled: Sampled) -> dict[str, Any]:
    """``body`` as the engine gets it: the rule's sampling fields over the agent's, its biases dropped."""
    out = {k: v for k, v in body.items() if k not in BIASES}
    out.update(sampled.upstream())
    return out

"""`rollout.sampling`: how the engines sample and what happens to an agent's own sampling settings.

The proxy applies it to every call (`seamlessflow.core.sampling` holds the rule and says why), the rollout
workers start their engines with the logprobs it names, and the trainer reproduces the recorded temperature:
the three meet here, as they do for the model itself.

```yaml
rollout:
  sampling:
    temperature: null        # null: each call's own (1.0 when unset), reproduced by the trainer
    truncation: override     # an agent's top_p / top_k / min_p: override (sampled without) | refuse (400)
    penalties: override      # presence / frequency / repetition penalties, logit_bias, bad_words, allowed_token_ids
    greedy: mask             # temperature 0: mask (served, never trained) | refuse (400)
    engine_logprobs: processed
```
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from seamlessflow.core.sampling import AgentSetting, GreedyCalls, LogprobSpace, SamplingRule

if TYPE_CHECKING:
    from seamlessflow.config import Settings

VLLM_LOGPROBS_MODE = {LogprobSpace.PROCESSED: "processed_logprobs", LogprobSpace.RAW: "raw_logprobs"}


class SamplingOptions(BaseModel):
    """How every call is sampled, so that each recorded logprob is of the distribution that sampled its token."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    temperature: float | None = Field(default=None, ge=0)
    """Every call's sampling temperature; null: each call's own (1.0 when it sets none). Either way it is recorded
    on the call's tokens and the trainer divides its logits by it, so the two distributions are the same."""
    truncation: AgentSetting = AgentSetting.OVERRIDE
    """An agent's own top_p, top_k or min_p, which the trainer cannot reproduce: override (the engine samples from
    the whole tempered distribution; the call is served and the setting counted in the proxy's
    `seamlessflow_proxy_sampling_overridden_total`) or refuse (400 naming the setting)."""
    penalties: AgentSetting = AgentSetting.OVERRIDE
    """An agent's own presence, frequency or repetition penalty, logit_bias, bad_words or allowed_token_ids:
    override (sent neutral, or dropped) or refuse (400 naming the setting)."""
    greedy: GreedyCalls = GreedyCalls.MASK
    """A call at temperature 0 (greedy): mask (served and recorded; its tokens are never trained, as no sampling
    distribution stands behind them) or refuse (400)."""
    engine_logprobs: LogprobSpace = LogprobSpace.PROCESSED
    """The logprobs the engines return: processed (the stack starts its engines with vLLM's
    `--logprobs-mode processed_logprobs`: after temperature and every filter) or raw (engines started without
    it; every call is then sampled at temperature 1, the only one raw logprobs describe)."""

    def rule(self) -> SamplingRule:
        return SamplingRule(self.temperature, self.truncation, self.penalties, self.greedy, self.engine_logprobs)

    @property
    def vllm_logprobs_mode(self) -> str:
        """vLLM's `--logprobs-mode` for these logprobs."""
        return VLLM_LOGPROBS_MODE[self.engine_logprobs]

    @classmethod
    def of(cls, settings: Settings) -> SamplingOptions:
        """`rollout.sampling` of the settings (the proxy reads it without the rest of the `rollout:` section)."""
        return cls.model_validate(settings.section("rollout").get("sampling") or {})

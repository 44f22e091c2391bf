"""The stack's sampling rule (pure): what the engine is sent and what is recorded, for an agent's own settings."""

import pytest

from seamlessflow.core.sampling import (
    AgentSetting,
    GreedyCalls,
    LogprobSpace,
    SamplingRefused,
    SamplingRule,
    upstream_sampling,
)


def test_an_agents_temperature_is_kept_and_every_filter_is_sent_off():
    sampled = SamplingRule().apply({"temperature": 0.6, "top_p": 0.9, "top_k": 20, "presence_penalty": 0.5})
    assert sampled.temperature == 0.6 and not sampled.greedy
    assert sampled.overridden == ("top_p", "top_k", "presence_penalty")
    assert sampled.upstream() == {"temperature": 0.6, "top_p": 1.0, "top_k": 0, "min_p": 0.0, "presence_penalty": 0.0,
                                  "frequency_penalty": 0.0, "repetition_penalty": 1.0}


def test_a_call_that_sets_nothing_is_sent_explicit_neutral_values_so_engine_defaults_never_apply():
    sampled = SamplingRule().apply({})
    body = upstream_sampling({"messages": [], "logit_bias": {"5": 100}}, sampled)
    assert body["temperature"] == 1.0 and body["top_p"] == 1.0 and body["repetition_penalty"] == 1.0
    assert "logit_bias" not in body and sampled.overridden == ()  # an empty-looking call overrides nothing it set


def test_neutral_values_an_agent_sets_itself_are_not_overrides():
    assert SamplingRule(truncation=AgentSetting.REFUSE).apply({"top_p": 1, "top_k": -1, "min_p": 0}).overridden == ()


def test_refused_settings_name_the_setting_and_the_option():
    with pytest.raises(SamplingRefused, match=r"rollout.sampling.truncation: refuse") as refused:
        SamplingRule(truncation=AgentSetting.REFUSE).apply({"top_p": 0.9})
    assert refused.value.setting == "top_p"
    with pytest.raises(SamplingRefused) as biased:
        SamplingRule(penalties=AgentSetting.REFUSE).apply({"logit_bias": {"1": 3}})
    assert biased.value.setting == "logit_bias"


def test_a_stack_temperature_overrides_the_agents():
    sampled = SamplingRule(temperature=0.8).apply({"temperature": 0.2})
    assert sampled.temperature == 0.8 and sampled.overridden == ("temperature",)


def test_greedy_calls_are_kept_for_masking_or_refused():
    assert SamplingRule().apply({"temperature": 0}).greedy
    with pytest.raises(SamplingRefused, match="greedy"):
        SamplingRule(greedy=GreedyCalls.REFUSE).apply({"temperature": 0.0})


def test_raw_logprob_engines_sample_at_temperature_one_the_only_one_their_logprobs_describe():
    sampled = SamplingRule(engine_logprobs=LogprobSpace.RAW).apply({"temperature": 0.5})
    assert sampled.temperature == 1.0 and sampled.logprob_space is LogprobSpace.RAW
    assert "temperature" in sampled.overridden


@pytest.mark.parametrize("body", [{"temperature": "hot"}, {"temperature": -1}, {"top_p": "all"}])
def test_settings_that_are_not_numbers_are_refused(body):
    with pytest.raises(SamplingRefused):
        SamplingRule().apply(body)

"""The eval section's defaults come from what it evaluates: the first agent pool and the agents' proxy."""

from seamlessflow.config import Settings
from seamlessflow.evaluation.options import EvalOptions


def test_defaults_follow_the_first_agent_pool_and_the_agents_proxy():
    settings = Settings.model_validate({"agent_pools": [{"function": "pkg.mod:fn"}],
                                        "agents": {"proxy_url": "http://h:9"}, "eval": {"eval_every": 3}})
    options = EvalOptions.from_settings(settings)
    assert (options.agent, options.proxy_url, options.eval_every) == ("pkg.mod:fn", "http://h:9", 3)


def test_an_explicit_agent_wins():
    settings = Settings.model_validate({"agent_pools": [{"function": "pkg.mod:fn"}], "eval": {"agent": "a:b"}})
    assert EvalOptions.from_settings(settings).agent == "a:b"

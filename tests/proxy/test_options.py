"""The proxy's `teams:` entries: a team's adapter, and the engine arguments that serve every team's."""

import pytest
from pydantic import ValidationError

from seamlessflow.proxy import ProxyOptions

TEAMS = {
    "red": {"lora": {"name": "red-lora", "path": "/a/red", "rank": 4}, "max_sessions": 2},
    "blue": {"lora": {"name": "blue-lora", "path": "/a/blue", "rank": 12}},
    "green": {"tokens_per_s": 100},
}


def test_a_team_is_served_its_adapter_and_a_team_without_one_the_base():
    options = ProxyOptions.model_validate({"teams": TEAMS})
    assert [options.adapter_of(t) for t in ("red", "blue", "green", "unnamed")] == ["red-lora", "blue-lora", None, None]
    assert options.teams["red"].max_sessions == 2  # the quota and the adapter share the team's entry


def test_the_engine_arguments_serve_every_adapter_at_a_rank_vllm_accepts():
    args = ProxyOptions.model_validate({"teams": TEAMS}).lora_engine_args()
    assert args == ["--enable-lora", "--max-loras", "2", "--max-lora-rank", "16",
                    "--lora-modules", "red-lora=/a/red", "blue-lora=/a/blue"]
    assert ProxyOptions.model_validate({"teams": {"green": {}}}).lora_engine_args() == []


@pytest.mark.parametrize("lora", [{"name": "x", "path": "/a", "rank": 0}, {"name": "", "path": "/a", "rank": 8},
                                  {"name": "x", "rank": 8}, {"name": "x", "path": "/a", "rank": 8, "alpha": 1}])
def test_a_bad_adapter_entry_is_refused(lora):
    with pytest.raises(ValidationError):
        ProxyOptions.model_validate({"teams": {"red": {"lora": lora}}})

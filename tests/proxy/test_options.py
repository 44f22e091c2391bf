"""The proxy's `teams:` entries: a team's adapter (the engines' flags for them are tested in
tests/rollout/test_vllm_process_lora.py)."""

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


@pytest.mark.parametrize("lora", [{"name": "x", "path": "/a", "rank": 0}, {"name": "", "path": "/a", "rank": 8},
                                  {"name": "x", "rank": 8}, {"name": "x", "path": "/a", "rank": 8, "alpha": 1}])
def test_a_bad_adapter_entry_is_refused(lora):
    with pytest.raises(ValidationError):
        ProxyOptions.model_validate({"teams": {"red": {"lora": lora}}})

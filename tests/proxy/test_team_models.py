"""A team is served only what its config gives it (stub engine, real broker): a call that names another team's
adapter as its model is refused with a 403 that names the setting, and nothing of it is recorded; a team's own
adapter, and any model that is no team's adapter, are served as before."""

from __future__ import annotations

import openai
import pytest

from seamlessflow.messages import TokenIO
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.team_models import check_model
from seamlessflow.testing.proxy_harness import client, session_events

TEAMS = {"alpha": {"lora": {"name": "alpha-lora", "path": "/adapters/alpha", "rank": 8}},
         "gamma": {"lora": {"name": "gamma-lora", "path": "/adapters/gamma", "rank": 8}}}  # beta: the base


@pytest.mark.parametrize(("team", "model", "served"), [("beta", "alpha-lora", "the base model"),
                                                        ("alpha", "gamma-lora", "its own adapter 'alpha-lora'")])
def test_another_teams_adapter_is_refused_naming_the_setting(team, model, served):
    with pytest.raises(ProxyError) as refused:
        check_model(ProxyOptions.model_validate({"teams": TEAMS}), team, model)
    owner = model.removesuffix("-lora")
    assert (refused.value.status, refused.value.param) == (403, "model")
    assert f"proxy.teams.{owner}.lora.name" in refused.value.message and served in refused.value.message


@pytest.mark.parametrize(("team", "model"), [("alpha", "alpha-lora"), ("alpha", "any"), ("beta", "any"),
                                             ("beta", "")])
def test_a_teams_own_adapter_and_other_models_pass(team, model):
    check_model(ProxyOptions.model_validate({"teams": TEAMS}), team, model)


async def test_a_base_team_naming_another_teams_adapter_gets_a_403_and_nothing_is_recorded(proxy_factory, stub,
                                                                                           settings, codec):
    proxy = await proxy_factory([stub], teams=TEAMS)
    beta = client(proxy, "b1", key="key-beta")
    with pytest.raises(openai.PermissionDeniedError) as refused:
        await beta.completions.create(model="alpha-lora", prompt=[5], max_tokens=2)
    assert "proxy.teams.alpha.lora.name" in refused.value.message
    with pytest.raises(openai.PermissionDeniedError):
        await client(proxy, "a1").chat.completions.create(model="gamma-lora",
                                                          messages=[{"role": "user", "content": "x"}])
    await beta.completions.create(model="m", prompt=[6], max_tokens=1)  # the session goes on, on the base
    await client(proxy, "a2").completions.create(model="alpha-lora", prompt=[7], max_tokens=1)
    calls = [m for m in await session_events(settings, codec) if isinstance(m, TokenIO)]
    assert sorted((c.session_id, c.adapter, list(c.prompt_ids)) for c in calls) == [
        ("a2", "alpha-lora", [7]), ("b1", None, [6])]

"""How the agent CLIs are pointed at the proxy and installed (the runs themselves: tests/proxy/test_agent_clis.py)."""

import tomllib

import pytest

from seamlessflow.testing import agent_clis


def test_the_codex_config_names_one_responses_provider_at_the_session():
    config = tomllib.loads(agent_clis.codex_config("http://127.0.0.1:9/sessions/s/v1", "tiny"))
    provider = config["model_providers"][config["model_provider"]]
    assert config["model"] == "tiny" and provider["base_url"] == "http://127.0.0.1:9/sessions/s/v1"
    assert (provider["wire_api"], provider["env_key"]) == ("responses", agent_clis.KEY_ENV)


def test_installing_without_npm_says_so(tmp_path, monkeypatch):
    monkeypatch.setattr(agent_clis.shutil, "which", lambda name: None)
    with pytest.raises(FileNotFoundError, match="npm"):
        agent_clis.install_agent_clis(tmp_path / "clis")

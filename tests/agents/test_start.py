"""The worker `seamlessflow agent run` and `python -m services.agents` both build (`agents.start`): the
team's key comes from the option, the key file or the config's `team_keys`, and a missing one is a usage
error naming the file."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from seamlessflow.agents.start import NoTeamKey, agent_worker, team_key
from seamlessflow.cli.agent import agent
from seamlessflow.config import Settings

AGENT = "seamlessflow.testing.agent_fns:reward_from_payload"


def test_the_key_is_the_option_else_the_team_key_file(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert team_key(settings, "red", "given") == "given"
    (tmp_path / "red.key").write_text("stored\n")
    assert team_key(settings, "red", None) == "stored"
    with pytest.raises(NoTeamKey, match="blue.key"):
        team_key(settings, "blue", None)
    # a pool on another host than `up`'s: the key travels in the config
    assert team_key(settings.with_overrides(team_keys={"blue": "travelled"}), "blue", None) == "travelled"


def test_options_override_the_agents_section(tmp_path):
    settings = Settings(data_dir=tmp_path).with_overrides(agents={"concurrency": 3, "pool": "p"})
    worker = agent_worker(settings, AGENT, "red", "k", concurrency=None, pool="q")
    assert (worker.group, worker.opts.concurrency, worker.key) == ("red.q", 3, "k")


def test_the_cli_reports_a_missing_key_as_a_usage_error(tmp_path):
    result = CliRunner().invoke(agent, ["run", AGENT, "--team", "blue"], obj=Settings(data_dir=tmp_path))
    assert result.exit_code == 2 and "blue.key" in result.output

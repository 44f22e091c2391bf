from click.testing import CliRunner

from seamlessflow.cli.team import team
from seamlessflow.config import Settings
from seamlessflow.teams import TeamKeys


def invoke(settings, *args):
    return CliRunner().invoke(team, list(args), obj=settings, catch_exceptions=False)


def test_add_prints_the_key_once_and_stores_only_its_hash(tmp_path):
    settings = Settings(data_dir=tmp_path)
    result = invoke(settings, "add", "red")
    assert result.exit_code == 0
    key = result.stdout.strip()
    assert key.startswith("sf-red-")
    assert TeamKeys.from_settings(settings).team_for(key) == "red"
    assert key not in (tmp_path / "teams.json").read_text()


def test_list_counts_keys_and_revoke_removes_them(tmp_path):
    settings = Settings(data_dir=tmp_path)
    keys = [invoke(settings, "add", "red").stdout.strip() for _ in range(2)]
    invoke(settings, "add", "blue")
    listing = invoke(settings, "list").stdout
    assert "red" in listing and "2" in listing and "blue" in listing
    assert invoke(settings, "revoke", "red").exit_code == 0
    assert TeamKeys.from_settings(settings).team_for(keys[0]) is None
    assert "red" not in invoke(settings, "list").stdout


def test_revoking_an_unknown_team_fails_and_bad_names_are_refused(tmp_path):
    settings = Settings(data_dir=tmp_path)
    runner = CliRunner()
    assert runner.invoke(team, ["revoke", "nobody"], obj=settings).exit_code == 1
    assert runner.invoke(team, ["add", "a.b"], obj=settings).exit_code == 2

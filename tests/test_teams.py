from seamlessflow.config import Settings
from seamlessflow.teams import TeamKeys


def test_issued_key_maps_to_its_team_and_is_stored_hashed(tmp_path):
    keys = TeamKeys(tmp_path / "teams.json")
    key = keys.add("alpha")
    assert keys.team_for(key) == "alpha"
    assert key not in (tmp_path / "teams.json").read_text()
    assert keys.team_for("sf-alpha-wrong") is None and keys.team_for(None) is None


def test_revoke_is_seen_by_a_running_reader(tmp_path):
    writer, reader = TeamKeys(tmp_path / "teams.json"), TeamKeys(tmp_path / "teams.json")
    key = writer.add("beta")
    assert reader.team_for(key) == "beta"
    assert writer.revoke("beta") == 1
    import os
    import time

    os.utime(tmp_path / "teams.json", (time.time() + 5, time.time() + 5))  # mtime resolution on some filesystems
    assert reader.team_for(key) is None


def test_env_and_config_keys(tmp_path):
    from_env = Settings.load(
        env={"SEAMLESSFLOW_TEAM_KEYS": "envteam=ek, other=ok", "SEAMLESSFLOW_DATA_DIR": str(tmp_path)}
    )
    assert TeamKeys.from_settings(from_env).teams() == {"envteam": 1, "other": 1}
    keys = TeamKeys.from_settings(Settings(data_dir=tmp_path, team_keys={"cfgteam": "ck"}))
    assert keys.team_for("ck") == "cfgteam" and keys.team_for("ek") is None


def test_default_key_is_created_once(tmp_path):
    keys = TeamKeys(tmp_path / "teams.json")
    first = keys.ensure_default()
    assert keys.ensure_default() == first and keys.team_for(first) == "default"

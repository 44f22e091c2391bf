from seamlessflow.config import Settings


def test_precedence_defaults_file_env_overrides(tmp_path):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("topic_prefix: fromfile\nrun: filerun\nproxy:\n  port: 8100\n  engines: [a]\n")
    env = {"SEAMLESSFLOW_RUN": "envrun", "SEAMLESSFLOW_PROXY__PORT": "8200", "OTHER": "x"}
    s = Settings.load(cfg, env=env, team="cli-team")
    assert (s.topic_prefix, s.run, s.team) == ("fromfile", "envrun", "cli-team")
    assert s.section("proxy") == {"port": 8200, "engines": ["a"]}
    assert s.embedded and s.kafka_bootstrap == "127.0.0.1:19092"


def test_pointing_at_a_cluster_disables_the_embedded_broker():
    s = Settings.load(env={"SEAMLESSFLOW_BOOTSTRAP_SERVERS": "kafka-1:9092,kafka-2:9092"})
    assert not s.embedded and s.kafka_bootstrap == "kafka-1:9092,kafka-2:9092"


def test_dump_and_reload_round_trip(tmp_path):
    s = Settings(team="t", partitions={"tasks": 8}, assembler={"idle_timeout_s": 30})
    again = Settings.load(s.dump_yaml(tmp_path / "x.yaml"), env={})
    assert again == s


DOCUMENTED_SETTINGS = {  # SEAMLESSFLOW_* variables the README and docstrings show, as a user would set them
    "SEAMLESSFLOW_TEAM_KEYS": "red=k1,blue=k2",
    "SEAMLESSFLOW_BOOTSTRAP_SERVERS": "127.0.0.1:1",
    "SEAMLESSFLOW_PROXY__PORT": "8100",
    "SEAMLESSFLOW_BROKERS": "3",
}


def process_variables(tmp_path):
    from seamlessflow.config import PROCESS_VARIABLES

    values = {name: "x" for name in PROCESS_VARIABLES}
    values.update(CONFIG=str(tmp_path / "none.yaml"), ACCEL="cpu", MODEL="tiny", NATIVE_TOOLS="1", TEST_TIMEOUT_S="5")
    (tmp_path / "none.yaml").write_text("{}\n")
    return {
        f"SEAMLESSFLOW_{name}": value for name, value in values.items() if name not in ("TOPICS_FILE", "SCHEMAS_DIR")
    }


def test_every_documented_variable_set_at_once_still_loads(tmp_path):
    env = {**DOCUMENTED_SETTINGS, **process_variables(tmp_path), "SEAMLESSFLOW_DATA_DIR": str(tmp_path)}
    settings = Settings.load(env=env)
    assert settings.team_keys == {"red": "k1", "blue": "k2"} and settings.brokers == 3
    assert settings.section("proxy") == {"port": 8100}
    assert not {"java", "kafka_libs", "maven_repo", "model", "accel"} & set(settings.model_extra or {})


def test_every_documented_variable_set_at_once_a_command_runs(tmp_path):
    """What broke every command: SEAMLESSFLOW_TEAM_KEYS as documented, seen by the generic mapping."""
    import os
    import subprocess
    import sys

    env = {**os.environ, **DOCUMENTED_SETTINGS, **process_variables(tmp_path), "SEAMLESSFLOW_DATA_DIR": str(tmp_path)}
    env.pop("SEAMLESSFLOW_BOOTSTRAP_SERVERS")
    done = subprocess.run([sys.executable, "-m", "seamlessflow", "team", "list"], env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "red" in done.stdout and "blue" in done.stdout


def test_malformed_team_keys_are_refused_with_the_expected_form():
    import pytest
    from pydantic import ValidationError

    with pytest.raises(ValidationError, match="team=key"):
        Settings.load(env={"SEAMLESSFLOW_TEAM_KEYS": "red"})

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

"""What a stack's settings become when its services run on other hosts (`up --ray`), from plain values."""

from seamlessflow.config import Settings
from seamlessflow.stack.ray_settings import for_the_cluster
from seamlessflow.teams import TeamKeys


def test_the_embedded_broker_listens_on_the_drivers_node_and_the_teams_key_travels_in_the_config(tmp_path):
    settings = for_the_cluster(Settings(data_dir=tmp_path), "10.233.7.1")
    assert settings.kafka_bootstrap == "10.233.7.1:19092"
    key = (tmp_path / "default.key").read_text().strip()
    assert settings.team_keys == {"default": key}
    # a proxy on another node, with a data directory of its own, knows the team by the config alone
    assert TeamKeys.from_settings(settings.with_overrides(data_dir=tmp_path / "elsewhere")).team_for(key) == "default"


def test_a_given_broker_address_or_cluster_is_kept(tmp_path):
    assert for_the_cluster(Settings(data_dir=tmp_path, broker_host="10.9.9.9"), "10.233.7.1").broker_host == "10.9.9.9"
    external = for_the_cluster(Settings(data_dir=tmp_path, bootstrap_servers="kafka:9092"), "10.233.7.1")
    assert external.kafka_bootstrap == "kafka:9092"


def test_servers_on_loopback_listen_everywhere_and_agents_find_the_proxy_on_the_drivers_node(tmp_path):
    settings = for_the_cluster(Settings(data_dir=tmp_path, rollout={"host": "127.0.0.1"}, proxy={"port": 8100},
                                        agents={"proxy_url": "http://127.0.0.1:8100"}), "10.233.7.1")
    assert settings.section("rollout")["host"] == "0.0.0.0" and settings.section("proxy")["host"] == "0.0.0.0"
    assert settings.section("agents")["proxy_url"] == "http://10.233.7.1:8100"


def test_a_chosen_address_or_a_proxy_placed_elsewhere_is_kept(tmp_path):
    settings = for_the_cluster(Settings(data_dir=tmp_path, rollout={"host": "10.1.1.1"},
                                        agents={"proxy_url": "http://127.0.0.1:8100"},
                                        cluster={"resources": {"proxy": {"node": "node_c"}}}), "10.233.7.1")
    assert settings.section("rollout")["host"] == "10.1.1.1"
    assert settings.section("agents")["proxy_url"] == "http://127.0.0.1:8100"  # the user says where, not us
    by_resource = for_the_cluster(Settings(data_dir=tmp_path, agents={"proxy_url": "http://127.0.0.1:8100"},
                                           cluster={"resources": {"proxy": {"custom": {"sf_cpu": 1}}}}), "10.2.3.4")
    assert by_resource.section("agents")["proxy_url"] == "http://127.0.0.1:8100"

"""What `seamlessflow up` runs on the embedded default, and that its pieces agree with each other."""

from seamlessflow.config import Settings
from seamlessflow.proxy import ProxyConfig
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.stack import app_services, with_stack_defaults


def test_the_default_stack_runs_the_whole_loop_in_order(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path))
    names = [spec.name for spec in app_services(settings)]
    assert names == ["assembler", "rollout-0", "rollout-1", "proxy", "trainer", "scheduler", "agents-default-demo"]
    rollout = next(s for s in app_services(settings) if s.name == "rollout-1")
    assert rollout.ready is not None  # agents wait until the engines serve


def test_default_pieces_agree(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path))
    proxy = ProxyConfig.model_validate(settings.section("proxy"))
    assert proxy.served_model == RolloutOptions.from_settings(settings).served_model_name
    assert settings.section("agents")["proxy_url"] == f"http://{proxy.host}:{proxy.port}"
    assert settings.section("trainer")["model_path"] == str(tmp_path.resolve() / "models" / "tiny")


def test_user_config_wins_and_services_can_be_turned_off(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path, services={"agents": False, "trainer": False},
                                            scheduler={"policy": "colocated"}))
    names = [spec.name for spec in app_services(settings)]
    assert "trainer" not in names and not any(n.startswith("agents") for n in names)
    assert settings.section("scheduler")["policy"] == "colocated"

"""What `seamlessflow up` runs on the embedded default, and that its pieces agree with each other."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from pydantic import ValidationError

from seamlessflow.config import Settings
from seamlessflow.ports import free_port
from seamlessflow.proxy import ProxyOptions
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.service_metrics import PORT_ENV
from seamlessflow.stack.services import app_services, issue_keys, metrics_ports, with_stack_defaults
from seamlessflow.teams import TeamKeys

ROOT = Path(__file__).resolve().parents[2]


def test_the_default_stack_runs_the_whole_loop_in_order(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path))
    names = [spec.name for spec in app_services(settings)]
    assert names == ["assembler", "tracking", "dashboard", "rollout-0", "rollout-1", "proxy", "trainer", "scheduler",
                     "agents-default-demo", "eval"]
    rollout = next(s for s in app_services(settings) if s.name == "rollout-1")
    assert rollout.ready is not None  # agents wait until the engines serve


def test_up_without_the_demo_runs_the_loop_with_no_task_source_agent_pool_or_eval_of_its_own(tmp_path):
    """`seamlessflow up --no-demo`: the trainer trains on what `init`'s pools run, and on nothing else."""
    from seamlessflow.cli.stack import without_demo
    from seamlessflow.scheduler.options import ManagerOptions

    settings = without_demo(with_stack_defaults(Settings(data_dir=tmp_path)))
    names = [spec.name for spec in app_services(settings)]
    assert names == ["assembler", "tracking", "dashboard", "rollout-0", "rollout-1", "proxy", "trainer", "scheduler"]
    assert not ManagerOptions.from_settings(settings).enabled
    dumped = settings.dump_yaml(tmp_path / "config.yaml")  # as a detached `up` hands it to its supervisor
    again = with_stack_defaults(Settings.load(dumped))
    assert [spec.name for spec in app_services(again)] == names


def test_every_service_runs_a_package_of_services(tmp_path):
    """The stack's `eval` (its config name) runs `services.evaluation`, the package named like its library."""
    specs = app_services(with_stack_defaults(Settings(data_dir=tmp_path)))
    for spec in specs:
        module = next(arg for arg in spec.argv if arg.startswith("services."))
        assert (ROOT / module.replace(".", "/") / "__main__.py").is_file(), spec.name
    evaluation = next(spec for spec in specs if spec.name == "eval")
    assert (evaluation.role, evaluation.argv[1:3]) == ("eval", ["-m", "services.evaluation"])


def test_the_engines_a_config_names_replace_the_defaults_two(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path, rollout={"workers": {"rollout-0": {}}}))
    assert [spec.name for spec in app_services(settings) if spec.name.startswith("rollout")] == ["rollout-0"]
    assert RolloutOptions.from_settings(settings).max_model_len == 32768  # the rest of the section still merges


def test_assembler_workers_are_one_supervised_service_each(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path, assembler={"workers": 3}))
    workers = [spec for spec in app_services(settings) if spec.name.startswith("assembler")]
    assert [spec.name for spec in workers] == ["assembler", "assembler-1", "assembler-2"]  # the first keeps its name
    assert all(spec.argv[1:3] == ["-m", "services.assembler"] for spec in workers)


def test_proxy_workers_share_one_address_as_resources_of_their_own(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path, proxy={"workers": 2}))
    workers = [spec for spec in app_services(settings) if spec.name.startswith("proxy")]
    assert [spec.name for spec in workers] == ["proxy-0", "proxy-1"]
    assert [spec.argv[-2:] for spec in workers] == [["--worker", "0"], ["--worker", "1"]]
    assert all(spec.ready is not None for spec in workers)


def test_default_pieces_agree(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path))
    proxy = ProxyOptions.from_settings(settings)
    assert proxy.served_model == RolloutOptions.from_settings(settings).served_model_name
    assert settings.section("agents")["proxy_url"] == f"http://{proxy.host}:{proxy.port}"
    from seamlessflow.evaluation.options import EvalOptions

    evaluation = EvalOptions.from_settings(settings)  # the eval asks what the agents ask, through their proxy
    assert evaluation.agent == settings.agent_pools[0]["function"]  # type: ignore[attr-defined]
    assert evaluation.proxy_url == settings.section("agents")["proxy_url"]


def test_user_config_wins_and_services_can_be_turned_off(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path, services={"agents": False, "trainer": False},
                                            scheduler={"policy": "colocated"}))
    names = [spec.name for spec in app_services(settings)]
    assert "trainer" not in names and not any(n.startswith("agents") for n in names)
    assert settings.section("scheduler")["policy"] == "colocated"


def test_a_trainer_with_ranks_is_one_service_under_torchs_launcher(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path, trainer={"ranks": 2}))
    [trainer] = [spec for spec in app_services(settings) if spec.name == "trainer"]
    argv = trainer.argv[trainer.argv.index("torch.distributed.run") + 1:]
    assert argv[:4] == ["--nproc-per-node=2", "--max-restarts=0", "--standalone", "-m"]
    assert argv[4:] == ["services.trainer", "--config", str(tmp_path.resolve() / "run" / "config.yaml")]

    nodes = with_stack_defaults(Settings(data_dir=tmp_path, trainer={"ranks": 8, "nnodes": 2, "node_rank": 1,
                                                                     "master_addr": "10.0.0.1"}))
    [trainer] = [spec for spec in app_services(nodes) if spec.name == "trainer"]
    assert "--standalone" not in trainer.argv
    assert {"--nnodes=2", "--node-rank=1", "--master-addr=10.0.0.1", "--master-port=29500"} <= set(trainer.argv)

    one = with_stack_defaults(Settings(data_dir=tmp_path))
    [trainer] = [spec for spec in app_services(one) if spec.name == "trainer"]
    assert trainer.argv[1:3] == ["-m", "services.trainer"]  # one rank: the plain process, as before


def test_a_stack_that_trains_adapters_runs_one_trainer_per_adapter_team(tmp_path):
    lora = {"name": "red-lora", "path": "/a/red", "rank": 4}
    teams = {"red": {"lora": lora}, "green": {"max_sessions": 2}, "blue": {"lora": {**lora, "name": "blue-lora"}}}
    settings = with_stack_defaults(Settings(data_dir=tmp_path, proxy={"teams": teams},
                                            trainer={"target": "adapters", "teams": {"blue": {"kl_coef": 0.1}}}))
    trainers = [spec for spec in app_services(settings) if spec.role == "trainer"]
    assert [spec.name for spec in trainers] == ["trainer-red", "trainer-blue"]  # green has no adapter: none
    env = {k: v for k, v in trainers[1].env.items() if k.startswith("SEAMLESSFLOW_TRAINER__")}
    assert env == {"SEAMLESSFLOW_TRAINER__ADAPTER": "blue", "SEAMLESSFLOW_TRAINER__RESOURCE_ID": "trainer-0-blue"}
    from seamlessflow.trainer.options import TrainerOptions

    # what the process reads: its team's entry over the section, under a consumer group of its own
    blue = TrainerOptions.from_settings(Settings.load(env=env, **settings.model_dump()))
    assert (blue.adapter, blue.resource_id, blue.kl_coef) == ("blue", "trainer-0-blue", 0.1)
    assert blue.group_id(settings).endswith(".trainer.blue") and blue == TrainerOptions.from_settings(
        settings).for_adapter("blue")

    without = with_stack_defaults(Settings(data_dir=tmp_path, trainer={"target": "adapters"}))
    with pytest.raises(ValueError, match="no team has one"):
        app_services(without)


def test_every_service_but_the_proxy_gets_its_own_metrics_port(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path, metrics={"port": 9500}))
    specs = app_services(settings)
    urls = metrics_ports(settings, specs)
    ports = [int(spec.env[PORT_ENV]) for spec in specs if spec.name not in ("proxy", "dashboard")]
    assert ports == list(range(9500, 9500 + len(specs) - 2))  # proxy and dashboard serve it on their own port
    assert "proxy" not in urls and urls["trainer"].startswith("http://127.0.0.1:95")


def test_specs_carry_what_a_placement_needs(tmp_path):
    settings = with_stack_defaults(Settings(
        data_dir=tmp_path,
        rollout={"workers": {"rollout-0": {}, "rollout-1": {"gpu": "0,1", "hardware_tags": ["h100"]}}},
        cluster={"resources": {"rollout-1": {"node": "node_b"}, "proxy": {"cpus": 2, "memory_mb": 512},
                               "agents": {"replicas": 3, "max_restarts": 4}}},
    ))
    specs = {spec.name: spec for spec in app_services(settings)}
    engine = specs["rollout-1"].resources
    assert (engine.cpus, engine.gpus, engine.custom, engine.node) == (1.0, 2.0, {"h100": 1.0}, "node_b")
    assert engine.wanted() == {"CPU": 1.0, "GPU": 2.0, "h100": 1.0, "node_b": 0.001}
    assert specs["rollout-0"].resources.wanted() == {"CPU": 1.0}
    assert specs["proxy"].resources.wanted() == {"CPU": 2.0, "memory": 512 * 2**20}
    assert specs["agents-default-demo"].replicas == 3
    assert specs["agents-default-demo"].restart.max_restarts == 4
    assert specs["scheduler"].resources.wanted() == {}  # waits on Kafka; asks for nothing by default
    assert {spec.role for spec in specs.values()} >= {"assembler", "rollout", "proxy", "agents", "eval"}


def test_only_consumer_group_members_run_as_copies(tmp_path):
    settings = with_stack_defaults(Settings(data_dir=tmp_path, cluster={"resources": {"proxy": {"replicas": 2}}}))
    with pytest.raises(ValidationError, match="proxy.workers"):
        app_services(settings)


def test_up_issues_a_key_for_each_team_whose_agent_pool_it_runs_once(tmp_path):
    """Found preparing the two-team demo: a pool of a team other than the configured one had no key to read."""
    pool = {"function": "services.agents.examples.calculator:agent", "pool": "demo"}
    settings = with_stack_defaults(Settings(data_dir=tmp_path, agent_pools=[{**pool, "team": "red"},
                                                                            {**pool, "team": "blue"}]))
    info = issue_keys(settings)
    assert list(info) == ["api key (default)", "api key (blue)", "api key (red)"]
    keys = {team: (tmp_path / f"{team}.key").read_text().strip() for team in ("default", "red", "blue")}
    stored = TeamKeys.from_settings(settings)
    assert {team: stored.team_for(key) for team, key in keys.items()} == {t: t for t in keys}
    issue_keys(settings)  # a second `up` keeps them
    assert {team: (tmp_path / f"{team}.key").read_text().strip() for team in keys} == keys


def test_the_two_team_demo_runs_a_trainer_and_an_agent_pool_per_adapter_team(tmp_path):
    """infra/examples/adapter-teams.yaml, what `make up-teams` starts."""
    import yaml

    from seamlessflow.scheduler.options import ManagerOptions
    from seamlessflow.stack.services import STACK_DEFAULTS

    config = yaml.safe_load((STACK_DEFAULTS.parent / "examples" / "adapter-teams.yaml").read_text())
    settings = with_stack_defaults(Settings.model_validate({**config, "data_dir": str(tmp_path)}))
    names = [spec.name for spec in app_services(settings)]
    assert {"trainer-red", "trainer-blue", "agents-red-demo", "agents-blue-demo"} <= set(names)
    assert "trainer" not in names  # the base is not trained
    assert {s.team for s in ManagerOptions.from_settings(settings).sources} == {"red", "blue"}


def test_a_proxy_with_the_stacks_engines_is_ready_once_it_can_route_to_one(tmp_path):
    """`up --detach` came back while the proxy still knew no engine: a call sent then was refused (503)."""
    health = {"status": "no_engines"}

    class Healthz(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = json.dumps(health).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args) -> None:
            pass

    port = free_port()
    settings = with_stack_defaults(Settings(data_dir=tmp_path)).with_overrides(proxy={"port": port})
    [proxy] = [s for s in app_services(settings) if s.name == "proxy"]
    assert proxy.ready is not None and "to answer /healthz" in proxy.ready()  # nothing listens yet
    server = ThreadingHTTPServer(("127.0.0.1", port), Healthz)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    without_engines = settings.with_overrides(services={"rollout": False})
    [listening_only] = [s for s in app_services(without_engines) if s.name == "proxy"]
    try:
        assert "to route to an engine" in proxy.ready()
        assert listening_only.ready is not None and listening_only.ready() == ""  # no engines of the stack's own
        health["status"] = "ok"
        assert proxy.ready() == ""
    finally:
        server.shutdown()
        server.server_close()


def test_teacher_workers_are_members_of_each_taught_teams_group_and_none_without_a_teacher(tmp_path):
    assert not [s for s in app_services(with_stack_defaults(Settings(data_dir=tmp_path))) if s.role == "teacher"]
    teams = {"red": {"url": "http://t:8000"}, "blue": {"engine": "rollout-0", "model": "red"}}
    settings = with_stack_defaults(Settings(data_dir=tmp_path, teacher={"teams": teams, "workers": 2}))
    teachers = [spec for spec in app_services(settings) if spec.role == "teacher"]
    assert [spec.name for spec in teachers] == ["teacher-red", "teacher-red-1", "teacher-blue", "teacher-blue-1"]
    assert all(spec.argv[1:3] == ["-m", "services.teacher"] for spec in teachers)
    assert [spec.argv[spec.argv.index("--team") + 1] for spec in teachers] == ["red", "red", "blue", "blue"]


def test_every_agent_pool_the_default_runs_starts_with_arguments_its_service_parses(tmp_path):
    import argparse

    from services.agents.__main__ import add_arguments

    settings = with_stack_defaults(Settings(data_dir=tmp_path))
    pools = [s for s in app_services(settings) if s.name.startswith("agents-")]
    assert pools
    for spec in pools:
        parser = argparse.ArgumentParser()
        parser.add_argument("--config")
        add_arguments(parser)
        args = parser.parse_args(spec.argv[3:])  # after `python -m services.agents`
        assert (args.concurrency, args.max_concurrency) == (8, 32)  # the demo's: sessions follow the engines

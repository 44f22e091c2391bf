"""What `seamlessflow up` runs, in order: the embedded broker (unless pointed at a cluster), topics, services.

Each service is started as `python -m services.<name> --config <effective config>`, so a service runs the
same way under the supervisor, by hand, or in a container on a real cluster.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import httpx
import yaml

from seamlessflow.broker.kraft import node_processes, prepare
from seamlessflow.config import Settings, _deep_merge
from seamlessflow.kafka.admin import cluster_ready, ensure_topics
from seamlessflow.model.choice import ensure_model
from seamlessflow.service_metrics import PORT_ENV
from seamlessflow.stack.metrics_urls import OWN_METRICS, metrics_file, write_urls
from seamlessflow.stack.options import AgentPoolOptions, ClusterOptions, MetricsOptions
from seamlessflow.stack.paths import config_path
from seamlessflow.stack.placement_protocol import Placement, expand_replicas
from seamlessflow.stack.resources import RestartPolicy, requested
from seamlessflow.stack.supervisor import Awaiting, ServiceSpec
from seamlessflow.stack.watch import engines_up
from seamlessflow.teams import TeamKeys
from seamlessflow.tracking.sink import default_logdir

if TYPE_CHECKING:
    from seamlessflow.proxy import ProxyOptions
    from seamlessflow.rollout.options import RolloutOptions

SERVICES = ("assembler", "tracking", "dashboard", "rollout", "proxy", "trainer", "scheduler", "agents", "eval",
            "teacher")
# the package under services/ of a role whose config name is shorter: `eval` (its section, its `services:` key)
# runs `services.evaluation`, the service of `seamlessflow.evaluation`
PACKAGES = {"eval": "evaluation"}
STACK_DEFAULTS = Path(__file__).resolve().parents[2] / "infra" / "stack-defaults.yaml"


def port_open(port: int, host: str = "127.0.0.1") -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


def listening(host: str, port: int) -> Awaiting:
    """A readiness check: the service accepts connections on host:port."""
    return lambda: "" if port_open(port, host) else f"{host}:{port} to accept connections"


def routing(host: str, port: int) -> Awaiting:
    """A readiness check: the proxy accepts connections and can route a call (its /healthz counts a routable
    engine). Accepting connections alone was not enough: it learns the engines from their heartbeats, and a
    call sent the moment `up --detach` returned was refused with 503 until the next one came."""
    def check() -> str:
        try:
            status = httpx.get(f"http://{host}:{port}/healthz", timeout=5).json().get("status")
        except (httpx.HTTPError, ValueError):
            return f"{host}:{port} to answer /healthz"
        return "" if status == "ok" else f"the proxy at {host}:{port} to route to an engine"
    return check


def brokers_registered(client: Settings, brokers: int) -> Awaiting:
    return lambda: "" if cluster_ready(client, brokers, 1.0) else f"{brokers} broker(s) to register"


def broker_services(settings: Settings) -> list[ServiceSpec]:
    """The embedded Kafka nodes, formatted on first use. All start before any is awaited (a KRaft quorum
    needs its voters), and the last waits until every broker is registered."""
    if not settings.embedded:
        return []
    prepare(settings)
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    specs = [ServiceSpec(p.name, p.argv, p.env, role="broker") for p in node_processes(settings)]
    specs[-1].ready, specs[-1].ready_timeout_s = brokers_registered(client, settings.brokers), 120
    return specs


def python_service(settings: Settings, name: str, *args: str, module: str | None = None,
                   ready: Awaiting | None = None, timeout_s: float = 120) -> ServiceSpec:
    role = module or name
    argv = [sys.executable, "-m", f"services.{PACKAGES.get(role, role)}", "--config", str(config_path(settings)), *args]
    return ServiceSpec(name, argv, {"PYTHONUNBUFFERED": "1"}, ready, timeout_s, role=role)


def enabled(settings: Settings, service: str, default: bool = False) -> bool:
    """Whether `up` runs `service` here (the `services:` map; infra/stack-defaults.yaml turns all on)."""
    return bool(settings.section("services").get(service, default))


def app_services(settings: Settings) -> list[ServiceSpec]:
    """The project's own services, in start order; each can be turned off in its config section."""
    from seamlessflow.proxy import ProxyOptions
    from seamlessflow.rollout.options import RolloutOptions

    specs = []
    if enabled(settings, "assembler"):
        specs += assembler_services(settings)
    if enabled(settings, "tracking"):
        specs.append(python_service(settings, "tracking"))
    if enabled(settings, "dashboard"):  # early, so the page shows the engines coming up
        host, port = dashboard_address(settings)
        specs.append(python_service(settings, "dashboard", ready=listening(host, port)))
    rollout = RolloutOptions.from_settings(settings)
    if enabled(settings, "rollout"):
        ids = list(rollout.workers) or ["rollout-0"]
        for resource_id in ids:
            specs.append(python_service(settings, rollout_service_name(resource_id), "--resource-id", resource_id,
                                        module="rollout"))
        # agents start only once the engines are up (vLLM takes ~40 s, minutes on a loaded machine)
        specs[-1].ready, specs[-1].ready_timeout_s = engines_up(settings, ids), rollout.health_timeout_s
    if enabled(settings, "proxy"):
        specs += proxy_services(ProxyOptions.from_settings(settings), settings, enabled(settings, "rollout"))
    if enabled(settings, "trainer"):
        specs += trainer_services(settings)
    if enabled(settings, "scheduler"):
        specs.append(python_service(settings, "scheduler"))
    for pool in running_pools(settings):
        specs += agent_pool_services(settings, pool)
    if enabled(settings, "eval"):
        specs.append(python_service(settings, "eval"))
    if enabled(settings, "teacher"):
        specs += teacher_services(settings)
    return with_requests(settings, specs, rollout)


def rollout_service_name(resource_id: str) -> str:
    """The supervised service of the rollout worker `resource_id`: `rollout-...` whatever the id."""
    return resource_id if resource_id.startswith("rollout") else f"rollout-{resource_id}"


def with_requests(settings: Settings, specs: list[ServiceSpec], rollout: RolloutOptions) -> list[ServiceSpec]:
    """Fills each spec's resources, replicas and restart policy from `cluster.resources` and the role's
    defaults; an engine's hardware tags and GPUs (`rollout.workers.<id>.gpu`) are part of its request."""
    cluster = ClusterOptions.from_settings(settings)
    for spec in specs:
        entry = cluster.entry(spec.name, spec.role)
        tags: list[str] = []
        gpus = 0.0
        if spec.role == "rollout":
            worker = rollout.workers.get(spec.argv[spec.argv.index("--resource-id") + 1])
            tags = list(worker.hardware_tags) if worker else []
            gpus = float(len(worker.gpu.split(","))) if worker and worker.gpu else 0.0
        spec.resources = requested(entry, spec.role, tags, gpus)
        spec.replicas = entry.replicas
        spec.restart = RestartPolicy(max_restarts=entry.max_restarts)
    return specs


def dashboard_address(settings: Settings) -> tuple[str, int]:
    """Where `up` starts the dashboard (infra/stack-defaults.yaml sets both; the dashboard validates its own
    section when it starts). Read here, not through the dashboard's options: the dashboard views the stack,
    so the stack imports nothing of it."""
    section = settings.section("dashboard")
    return str(section.get("host", "127.0.0.1")), int(section.get("port", 8300))


def metrics_ports(settings: Settings, specs: list[ServiceSpec]) -> dict[str, str]:
    """Gives every service its own Prometheus port, counted up from `metrics.port` (default 9400), but the
    proxy and the dashboard, whose own HTTP ports serve /metrics; returns {service: /metrics URL}. A service
    added later (`scale`) gets the next one, and a drained one leaves the list: `metrics_urls`."""
    metrics = MetricsOptions.from_settings(settings)
    host, port = metrics.host, metrics.port
    urls = {}
    for spec in specs:
        if spec.name not in OWN_METRICS:
            spec.env[PORT_ENV] = str(port)
            urls[spec.name] = f"http://{host}:{port}/metrics"
            port += 1
    return urls


def assembler_services(settings: Settings) -> list[ServiceSpec]:
    """`assembler.workers` processes in one consumer group sharing the session-events
    partitions (a session's events share a key, so one worker holds the whole session); each is supervised
    on its own, and a dead one's partitions move to the others until it is back. Named by `copies`."""
    from seamlessflow.assembler.options import AssemblerOptions

    workers = AssemblerOptions.from_settings(settings).workers
    return [python_service(settings, name, module="assembler") for name in copies("assembler", workers)]


def teacher_services(settings: Settings) -> list[ServiceSpec]:
    """`teacher.workers` members of each taught team's consumer group (`<team>.teacher`), named
    `teacher-<team>[-i]`; none for a stack without `teacher.teams`."""
    from seamlessflow.teacher.options import TeacherOptions

    options = TeacherOptions.from_settings(settings)
    return [python_service(settings, name, "--team", team, module="teacher")
            for team in options.teams for name in copies(f"teacher-{team}", options.workers)]


def copies(name: str, count: int) -> list[str]:
    """The names of `count` interchangeable processes of one service (assembler workers, an agent pool's
    workers): the first is `name`, the others `<name>-1`, `<name>-2`, ... So a change of the count
    (`seamlessflow scale`) leaves the processes that stay under the names they run by: from one to two
    starts `<name>-1` beside `<name>`, and back to one stops `<name>-1`."""
    return [name, *(f"{name}-{i}" for i in range(1, count))]


def proxy_services(proxy: ProxyOptions, settings: Settings, engines: bool = False) -> list[ServiceSpec]:
    """`proxy.workers` processes on one address (SO_REUSEPORT: the kernel spreads connections over them).
    Any of them serves any call: engines are picked by hashing the session id over the same engine table
    (config and status topic), so a session keeps its engine whichever worker serves it; each worker is
    its own resource (`<id>-<i>`) on the control and status topics, so the scheduler pauses every one.
    With the stack's own `engines` (started and up before the proxy) it is ready once it can route to one."""
    ready = routing(proxy.host, proxy.port) if engines else listening(proxy.host, proxy.port)
    if proxy.workers == 1:
        return [python_service(settings, "proxy", ready=ready)]
    return [python_service(settings, f"proxy-{i}", "--worker", str(i), module="proxy", ready=ready)
            for i in range(proxy.workers)]


def trainer_services(settings: Settings) -> list[ServiceSpec]:
    """The trainer; with `trainer.target: adapters`, one per team with an adapter (`proxy.teams.<team>.lora`),
    each training only its team's adapter on the frozen base (`TrainerOptions.adapter`)."""
    from seamlessflow.trainer.options import TrainerOptions

    options = TrainerOptions.from_settings(settings)
    if options.target == "base":
        return [trainer_service(settings)]
    teams = adapter_teams(settings)
    if not teams:
        raise ValueError("trainer.target is 'adapters' but no team has one: give a team `proxy.teams.<team>.lora` "
                         "(`seamlessflow team add NAME --lora RANK`)")
    return [trainer_service(settings, team) for team in teams]


def adapter_teams(settings: Settings) -> list[str]:
    """The teams that own a LoRA adapter (`proxy.teams.<team>.lora`), in config order."""
    from seamlessflow.model.lora import team_adapters

    return list(team_adapters(settings))


def trainer_service(settings: Settings, adapter: str | None = None) -> ServiceSpec:
    """One supervised service whatever the ranks: with `trainer.ranks` > 1 (or several nodes) it is torch's
    launcher, which starts the ranks and takes them all down when one fails, so the supervisor restarts
    the group as a whole (`seamlessflow.trainer.launch`). With `nnodes` > 1 it is a gang: Ray places one
    member per node (`ray_placement`); the local supervisor runs this node's member. `adapter`: the team
    whose adapter it trains, told through the environment (so every rank reads it): it is then its own
    resource (`<resource_id>-<team>`) with its own work dir, consumer group, role writer and versions."""
    from seamlessflow.trainer.launch import launcher_argv
    from seamlessflow.trainer.options import TrainerOptions

    options = TrainerOptions.from_settings(settings)
    spec = python_service(settings, "trainer")
    if adapter is not None:
        options = options.for_adapter(adapter)
        spec.name = f"trainer-{adapter}"
        spec.env["SEAMLESSFLOW_TRAINER__ADAPTER"] = adapter
        spec.env["SEAMLESSFLOW_TRAINER__RESOURCE_ID"] = options.resource_id
    argv = launcher_argv(options, config_path(settings))
    if argv is not None:
        spec.argv = argv
    spec.gang = options.nnodes
    return spec


def issue_keys(settings: Settings) -> dict[str, str]:
    """The configured team's key (printed by `up`) and one for each team whose agent pool the stack runs (the
    pools read it from <data_dir>/<team>.key), each issued once and kept there; returns what `up` prints."""
    keys, data_dir = TeamKeys.from_settings(settings), Path(settings.data_dir)
    key = keys.ensure_default(settings.team)
    info = {f"api key ({settings.team})": f"{key}  (also in {data_dir / (settings.team + '.key')})"}
    for team in sorted(pool_teams(settings) - {settings.team}):
        keys.ensure_default(team)
        info[f"api key ({team})"] = f"in {data_dir / (team + '.key')}"
    return info


def running_pools(settings: Settings) -> list[dict]:
    """The `agent_pools` entries this stack runs (none when `services.agents` is off)."""
    return (getattr(settings, "agent_pools", None) or []) if enabled(settings, "agents") else []


def pool_teams(settings: Settings) -> set[str]:
    """The teams of the agent pools this stack runs."""
    return {AgentPoolOptions.model_validate(pool).team or settings.team for pool in running_pools(settings)}


def agent_pool_services(settings: Settings, entry: dict) -> list[ServiceSpec]:
    """`entry`: one of `agent_pools` (`AgentPoolOptions`): its `workers` processes, members of the pool's
    consumer group, named by `copies` from `agents-<team>-<pool>`; the key is read from <data_dir>/<team>.key."""
    pool = AgentPoolOptions.model_validate(entry)
    team = pool.team or settings.team
    args = [pool.function, "--team", team, "--pool", pool.pool, "--concurrency", str(pool.concurrency)]
    if pool.max_concurrency:
        args += ["--max-concurrency", str(pool.max_concurrency)]
    return [python_service(settings, name, *args, module="agents")
            for name in copies(f"agents-{team}-{pool.pool}", pool.workers)]


def with_stack_defaults(settings: Settings) -> Settings:
    """The embedded default's services (infra/stack-defaults.yaml) under whatever the user configured. The
    engines a config names in `rollout.workers` are the stack's engines: they replace the default's two rather
    than join them (merged, a config naming only rollout-0 still ran the default's rollout-1 beside it)."""
    defaults = yaml.safe_load(STACK_DEFAULTS.read_text()) or {}
    configured = settings.model_dump(exclude_unset=True)
    if (configured.get("rollout") or {}).get("workers"):
        defaults.get("rollout", {}).pop("workers", None)
    return Settings.model_validate(_deep_merge(defaults, configured))


def prepare_model(settings: Settings, log: Callable[[str], None]) -> None:
    """Builds (or reuses) the tiny local model once, before the workers and the trainer start, when one of them
    serves or trains it (a trainer given its own `model_path` does not)."""
    trainer_needs = enabled(settings, "trainer") and not settings.section("trainer").get("model_path")
    if enabled(settings, "rollout") or trainer_needs:
        log(f"model: {ensure_model(settings, log)}")


def start_stack(settings: Settings, placement: Placement, log: Callable[[str], None] = print) -> None:
    """Starts the stack through `placement`, whichever it is (the local supervisor or Ray: `placement_choice`). Every
    spec is built, and checked by the placement, before anything starts."""
    settings.dump_yaml(config_path(settings))
    brokers = broker_services(settings)
    specs = expand_replicas(app_services(settings))
    placement.check_all(brokers + specs)
    for spec in brokers:
        placement.start(spec)
    client = settings.with_overrides(bootstrap_servers=settings.kafka_bootstrap)
    ensure_topics(client)
    placement.info["bootstrap_servers"] = settings.kafka_bootstrap
    placement.info["topic_prefix"] = settings.topic_prefix
    placement.info["generation"] = settings.generation
    if placement.shares_disk:  # elsewhere each engine and trainer finds or builds it on its node
        prepare_model(settings, log)
    if enabled(settings, "proxy"):
        from seamlessflow.proxy import ProxyOptions

        proxy = ProxyOptions.from_settings(settings)
        placement.info["proxy"] = f"http://{proxy.host}:{proxy.port}/v1"
        placement.info.update(issue_keys(settings))
    urls = metrics_ports(settings, specs)
    if enabled(settings, "proxy"):
        urls["proxy"] = placement.info["proxy"].removesuffix("/v1") + "/metrics"
    if enabled(settings, "dashboard"):
        host, port = dashboard_address(settings)
        urls["dashboard"] = f"http://{host}:{port}/metrics"
        placement.info["dashboard"] = f"http://{host}:{port}/"
        log(f"dashboard: http://{host}:{port}/")
    if enabled(settings, "tracking"):
        placement.info["tensorboard"] = f"tensorboard --logdir {default_logdir(settings).parent.parent}"
    write_urls(settings, urls)
    placement.info["metrics"] = f"one /metrics per service, listed in {metrics_file(settings)}"
    for spec in specs:
        placement.start(spec)
    placement.ready = True
    placement.write_state()

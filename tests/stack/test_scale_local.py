"""`scale` on one machine and the autoscaler's advice carried out: the supervisor reconciles its rollout workers,
assembler workers and agent workers with the effective config on SIGUSR1 (`reconcile`), `scale` edits the config
and signals it, and with `scheduler.autoscale.act` the supervisor acts on the scheduler's advice itself
(`AdviceActor`)."""

import contextlib
import json
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import urllib.request
import uuid

import pytest
import yaml

from seamlessflow.config import Settings
from seamlessflow.ports import free_port_block
from seamlessflow.service_metrics import PORT_ENV
from seamlessflow.stack.metrics_urls import listed_urls, write_urls
from seamlessflow.stack.paths import config_path, log_dir, run_dir
from seamlessflow.stack.placement_protocol import PlacementError, expand_replicas
from seamlessflow.stack.processes import pid_alive
from seamlessflow.stack.scale import AdviceActor, reconcile, scale_stack
from seamlessflow.stack.services import SERVICES, app_services, metrics_ports
from seamlessflow.stack.supervisor import ServiceSpec, ServiceState, Supervisor
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import topic_specs


class SupervisorStandIn:
    """What `reconcile` uses of the local supervisor, recording its starts and stops (a stand-in: a
    real start would be a rollout worker and its vLLM engine)."""

    def __init__(self, running: list[str]):
        self.specs = {name: ServiceSpec(name, ["x"], role="rollout") for name in running}
        self.specs["proxy"] = ServiceSpec("proxy", ["x"], role="proxy")
        self.states = {name: ServiceState(name, state="running") for name in self.specs}
        self.calls: list[tuple[str, str]] = []

    def start(self, spec: ServiceSpec) -> None:
        self.specs[spec.name], self.states[spec.name] = spec, ServiceState(spec.name, state="running")
        self.calls.append(("start", spec.name))

    def stop(self, name: str, grace_s: float | None = None) -> None:
        self.states[name].state = "stopped"
        self.calls.append(("stop", name))

    def write_state(self) -> None:
        self.calls.append(("write", ""))


def effective_config(tmp_path, workers):
    path = tmp_path / "run" / "config.yaml"
    path.parent.mkdir(exist_ok=True)
    path.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "rollout": {"workers": workers}}))
    return path


def test_the_supervisor_drains_what_the_config_dropped_and_starts_what_it_added(tmp_path):
    effective = effective_config(tmp_path, {"rollout-0": {}, "rollout-3": {"capability_tags": ["rollout"]}})
    placement = SupervisorStandIn(["rollout-0", "rollout-2"])
    said: list[str] = []
    assert reconcile(effective, placement, said.append) == (["rollout-3"], ["rollout-2"])
    assert placement.calls[:2] == [("stop", "rollout-2"), ("start", "rollout-3")]  # drained first: cores back
    assert "rollout-2" not in placement.states and placement.specs["rollout-3"].argv[-2:] == ["--resource-id",
                                                                                              "rollout-3"]
    assert reconcile(effective, placement, said.append) == ([], [])  # nothing more to do


def test_an_added_service_gets_the_next_metrics_port_and_a_drained_one_leaves_metrics_json(tmp_path):
    effective = effective_config(tmp_path, {"rollout-0": {}, "rollout-1": {}, "rollout-2": {}})
    settings = Settings(data_dir=tmp_path)
    write_urls(settings, {"rollout-0": "http://127.0.0.1:9400/metrics", "rollout-1": "http://127.0.0.1:9401/metrics",
                          "proxy": "http://127.0.0.1:9999/metrics", "dashboard": "http://127.0.0.1:8300/metrics"})
    placement = SupervisorStandIn(["rollout-0", "rollout-1"])
    assert reconcile(effective, placement, print) == (["rollout-2"], [])
    # above every service's port (not above the proxy's and dashboard's own HTTP ports)
    assert placement.specs["rollout-2"].env[PORT_ENV] == "9402"
    assert listed_urls(settings)["rollout-2"] == "http://127.0.0.1:9402/metrics"
    effective_config(tmp_path, {"rollout-0": {}, "rollout-2": {}})
    assert reconcile(effective, placement, print) == ([], ["rollout-1"])
    assert set(listed_urls(settings)) == {"rollout-0", "rollout-2", "proxy", "dashboard"}
    effective_config(tmp_path, {"rollout-0": {}, "rollout-2": {}, "rollout-3": {}})
    reconcile(effective, placement, print)
    assert placement.specs["rollout-3"].env[PORT_ENV] == "9403"  # never a running service's port


SUPERVISOR = textwrap.dedent("""
    import json, os, signal, sys, time
    state = sys.argv[1]
    def reconcile(*_):  # what the supervisor records once the new worker serves
        data = json.load(open(state))
        data["services"]["rollout-1"] = {"name": "rollout-1", "pid": os.getpid(), "state": "running"}
        json.dump(data, open(state, "w"))
    signal.signal(signal.SIGUSR1, reconcile)
    print("ready", flush=True)
    while True:
        time.sleep(0.1)
""")


def test_scale_on_one_machine_edits_the_config_and_signals_the_supervisor(tmp_path):
    settings = Settings(data_dir=tmp_path)
    effective = effective_config(tmp_path, {"rollout-0": {}})
    with pytest.raises(PlacementError, match="no supervisor holds"):
        scale_stack(settings, 1, print)
    assert yaml.safe_load(effective.read_text())["rollout"]["workers"] == {"rollout-0": {}}  # nothing edited
    state = tmp_path / "run" / "state.json"
    holder = subprocess.Popen([sys.executable, "-c", SUPERVISOR, str(state)], stdout=subprocess.PIPE, text=True)
    try:
        state.write_text(json.dumps({"supervisor_pid": holder.pid, "services": {}}))
        assert holder.stdout is not None and holder.stdout.readline().strip() == "ready"
        changed = scale_stack(settings, 1, print)
    finally:
        holder.kill()
    assert list(changed) == ["rollout-1"] and changed["rollout-1"].state == "running"
    assert list(yaml.safe_load(effective.read_text())["rollout"]["workers"]) == ["rollout-0", "rollout-1"]


def scheduler_row(change: float, age_s: float, note: str = "autoscale advice: 1 -> 2 engines (backlog: +1)"):
    return {"kind": "scheduler", "figures": {"autoscale_change": change}, "heartbeat_age_s": age_s, "note": note}


def test_the_supervisor_acts_on_the_advice_once_per_change_the_scheduler_has_seen(tmp_path):
    effective = effective_config(tmp_path, {"rollout-0": {}})
    placement = SupervisorStandIn(["rollout-0"])
    said: list[str] = []
    actor = AdviceActor(effective, AdviceActor.on_this_machine(effective, placement, said.append), said.append,
                        settle_s=10.0)
    assert actor.step([scheduler_row(1.0, age_s=1.0)], now_s=100.0) == 1
    assert ("start", "rollout-1") in placement.calls and "carrying out autoscale advice" in said[0]
    done = actor.done_at
    # the scheduler's next heartbeats still advise +1 until it counts the new engine: not acted on twice
    assert actor.step([scheduler_row(1.0, age_s=0.5)], now_s=done + 5.0) == 0
    assert actor.step([scheduler_row(0.0, age_s=0.5)], now_s=done + 30.0) == 0
    assert actor.step([scheduler_row(-1.0, age_s=0.5)], now_s=done + 90.0) == -1  # the burst passed
    assert ("stop", "rollout-1") in placement.calls
    assert list(yaml.safe_load(effective.read_text())["rollout"]["workers"]) == ["rollout-0"]
    actor.done_at = 0.0
    assert actor.step([scheduler_row(-1.0, age_s=0.5)], now_s=done + 200.0) == 0  # one engine always stays
    assert "not carried out" in said[-1]


def test_the_advice_adds_rollout_only_engines_and_never_past_the_limits(tmp_path):
    """Found on a live stack: engines added like a train-capable one were lent to training at once, so the advice
    (which counts engines serving rollout) asked again at every settle, and the supervisor started nine engines
    with max_engines 2. Now the advice's engines serve rollout only, and the config holds no more than max."""
    effective = effective_config(tmp_path, {"rollout-0": {"capability_tags": ["rollout", "train"]}})
    placement = SupervisorStandIn(["rollout-0"])
    said: list[str] = []
    actor = AdviceActor(effective, AdviceActor.on_this_machine(effective, placement, said.append), said.append,
                        settle_s=10.0, engines=(1, 2))
    assert actor.step([scheduler_row(1.0, age_s=0.0)], now_s=100.0) == 1
    workers = yaml.safe_load(effective.read_text())["rollout"]["workers"]
    assert workers["rollout-1"]["capability_tags"] == ["rollout"]
    # the scheduler still sees one engine serving rollout (the new one loading, or lent away): it asks again
    assert actor.step([scheduler_row(1.0, age_s=0.0)], now_s=actor.done_at + 30.0) == 0
    assert "not carried out" in said[-1] and "[1, 2]" in said[-1]
    assert [c for c in placement.calls if c[0] == "start"] == [("start", "rollout-1")]


@contextlib.contextmanager
def live_supervisor(settings: Settings):
    """A real supervisor of `settings`' services in this process, following its effective config as `up` does:
    SIGUSR1 makes its loop (a thread here, `up`'s main loop there) reconcile. Each service on its own /metrics
    port, listed in metrics.json, as `up` starts them."""
    effective = settings.dump_yaml(config_path(settings))
    specs = expand_replicas(app_services(settings))
    write_urls(settings, metrics_ports(settings, specs))
    placement = Supervisor(run_dir(settings), log_dir(settings), grace_s=5, say=print)
    reload, done = threading.Event(), threading.Event()

    def follow():
        while not done.is_set():
            if reload.is_set():
                reload.clear()
                reconcile(effective, placement, print)
            placement.check()
            time.sleep(0.2)

    previous = signal.signal(signal.SIGUSR1, lambda *_: reload.set())
    loop = threading.Thread(target=follow, daemon=True)
    try:
        for spec in specs:
            placement.start(spec)
        placement.ready = True
        placement.write_state()
        loop.start()
        yield placement
    finally:
        done.set()
        if loop.is_alive():
            loop.join(30)
        placement.stop_all()
        signal.signal(signal.SIGUSR1, previous)


def holding(settings: Settings, topic: str, services: list[str]) -> list[set[int]] | None:
    """The partitions of `topic` each service's consumer holds after its group's last rebalance, read from the
    assignments its log records (`Subscriber`); None until each holds some and together they hold all, once."""
    held = []
    for name in services:
        lines = (log_dir(settings) / f"{name}.log").read_text().splitlines()
        latest = [line for line in lines if f"{topic}: assigned [" in line][-1:]
        held.append({int(p) for p in re.findall(r"\((\d+), -?\d+\)", latest[0])} if latest else set())
    partitions = next(spec.partitions for spec in topic_specs(settings) if spec.full_name == topic)
    together = set().union(*held)
    return held if all(held) and sum(map(len, held)) == len(together) == partitions else None


def serves_metrics(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status == 200 and b"python_info" in response.read()
    except OSError:
        return False


def test_assembler_and_agent_workers_scale_up_and_down_on_a_live_supervisor(settings):
    """Real processes on the test broker: a second assembler worker and a second agent worker join their
    groups beside the first (which run on under their names) and take partitions from them, then are drained,
    and the first ones hold every partition again."""
    team, pool = "red", f"p{uuid.uuid4().hex[:8]}"
    stack = settings.with_overrides(
        services={name: name in ("assembler", "agents") for name in SERVICES}, team_keys={team: "sk-test"},
        agent_pools=[{"function": "services.agents.examples.single_turn:agent", "team": team, "pool": pool,
                      "concurrency": 1}],
        agents={"proxy_url": "http://127.0.0.1:9", "revoke_grace_s": 1.0}, stop_grace_s=5.0,
        metrics={"port": free_port_block(4)})
    events, tasks = f"{stack.topic_prefix}.session-events", f"{stack.topic_prefix}.tasks"
    first = f"agents-{team}-{pool}"
    with live_supervisor(stack) as placement:
        pids = {name: placement.states[name].pid for name in ("assembler", first)}
        assert wait_until(lambda: holding(stack, events, ["assembler"]) and holding(stack, tasks, [first]), 60)
        added = scale_stack(stack, 1, print, "assembler") | scale_stack(stack, 1, print, "agents")
        assert {name: s.state for name, s in added.items()} == {"assembler-1": "running", f"{first}-1": "running"}
        assert wait_until(lambda: holding(stack, events, ["assembler", "assembler-1"])
                          and holding(stack, tasks, [first, f"{first}-1"]), 60), "the groups did not rebalance"
        assert {name: placement.states[name].pid for name in pids} == pids  # the first ones never restarted
        urls = listed_urls(stack)
        assert set(urls) == set(pids) | set(added) and len(set(urls.values())) == 4  # a port each
        assert wait_until(lambda: all(serves_metrics(urls[name]) for name in added), 30), urls
        new = [placement.states[name].pid for name in added]
        gone = scale_stack(stack, -1, print, "assembler") | scale_stack(stack, -1, print, f"agents:{team}-{pool}")
        assert set(gone) == set(added) and not any(pid_alive(pid) for pid in new)
        assert set(placement.states) == set(pids)  # drained: no longer the stack's
        assert set(listed_urls(stack)) == set(pids)  # nor listed for Prometheus and the dashboard
        assert wait_until(lambda: holding(stack, events, ["assembler"]) and holding(stack, tasks, [first]), 60)
        config = yaml.safe_load(config_path(stack).read_text())
        assert config["assembler"]["workers"] == 1 and config["agent_pools"][0]["workers"] == 1
        with pytest.raises(ValueError, match="one stays"):
            scale_stack(stack, -1, print, "assembler")


def test_scaling_agents_on_an_unreachable_ray_cluster_edits_nothing_and_a_role_that_does_not_scale_is_refused(
        tmp_path):
    from click.testing import CliRunner

    from seamlessflow.cli.main import cli

    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "state.json").write_text(json.dumps({"services": {}, "placement": {
        "engine": "ray", "address": "127.0.0.1:1", "namespace": "seamlessflow-gone"}}))
    with pytest.raises(PlacementError, match="cannot reach the Ray cluster at 127.0.0.1:1"):
        scale_stack(Settings(data_dir=tmp_path), 1, print, "agents")
    assert not (tmp_path / "run" / "config.yaml").exists()  # refused before any edit
    refused = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "scale", "trainer=+1"])
    assert refused.exit_code == 2 and "scale rollout, assembler or agents" in refused.output.replace("\n", " ")

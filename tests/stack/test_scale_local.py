"""`scale` on one machine and the autoscaler's advice carried out: the supervisor reconciles its rollout workers
with the effective config on SIGUSR1 (`reconcile_engines`), `scale` edits the config and signals it, and with
`scheduler.autoscale.act` the supervisor acts on the scheduler's advice itself (`AdviceActor`)."""

import json
import subprocess
import sys
import textwrap

import pytest
import yaml

from seamlessflow.config import Settings
from seamlessflow.stack.placement import PlacementError
from seamlessflow.stack.scale import AdviceActor, reconcile_engines, scale_stack
from seamlessflow.stack.supervisor import ServiceSpec, ServiceState


class SupervisorStandIn:
    """What `reconcile_engines` uses of the local supervisor, recording its starts and stops (a stand-in: a
    real start would be a rollout worker and its vLLM engine)."""

    def __init__(self, running: list[str]):
        self.specs = {name: ServiceSpec(name, ["x"], role="rollout") for name in running}
        self.specs["proxy"] = ServiceSpec("proxy", ["x"], role="proxy")
        self.states = {name: ServiceState(name, state="running") for name in self.specs}
        self.calls: list[tuple[str, str]] = []

    def start(self, spec: ServiceSpec) -> None:
        self.specs[spec.name], self.states[spec.name] = spec, ServiceState(spec.name, state="running")
        self.calls.append(("start", spec.name))

    def stop(self, name: str) -> None:
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
    assert reconcile_engines(effective, placement, said.append) == (["rollout-3"], ["rollout-2"])
    assert placement.calls[:2] == [("stop", "rollout-2"), ("start", "rollout-3")]  # drained first: cores back
    assert "rollout-2" not in placement.states and placement.specs["rollout-3"].argv[-2:] == ["--resource-id",
                                                                                              "rollout-3"]
    assert reconcile_engines(effective, placement, said.append) == ([], [])  # nothing more to do


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
    actor = AdviceActor(effective, placement, said.append, settle_s=10.0)
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

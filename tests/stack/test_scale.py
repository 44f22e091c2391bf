"""`scale rollout=+N`: which engines it adds and what each new one's spec copies; `scale assembler=+N` and
`scale agents=+N` and `scale teacher=+N`: the counts they change in the effective config and the services that
makes."""

import pytest
import yaml

from seamlessflow.config import Settings
from seamlessflow.service_metrics import PORT_ENV
from seamlessflow.stack.metrics_urls import listed_urls, write_urls
from seamlessflow.stack.placement_protocol import PlacementError
from seamlessflow.stack.scale import (
    AdviceActor,
    added_engines,
    changed_services,
    drain_engines,
    parse_change,
    removed_engines,
    scale_engines,
    scale_stack,
)
from seamlessflow.stack.scale_edits import scale_assemblers, scale_pool, scale_teachers, split_role
from seamlessflow.stack.supervisor import NoNodeJoined, ServiceSpec, ServiceState


def test_new_engines_follow_the_highest_id_and_copy_the_last_spec_but_its_own_port_cores_and_gpus():
    workers = {"rollout-0": {"capability_tags": ["rollout"]},
               "rollout-3": {"capability_tags": ["rollout", "train"], "hardware_tags": ["h100"], "port": 8201,
                             "cpus": "1", "gpu": "1"}}
    assert added_engines(workers, 2) == {
        "rollout-4": {"capability_tags": ["rollout", "train"], "hardware_tags": ["h100"]},
        "rollout-5": {"capability_tags": ["rollout", "train"], "hardware_tags": ["h100"]},
    }
    assert added_engines({}, 1) == {"rollout-0": {}}
    with pytest.raises(ValueError, match="N >= 1"):
        added_engines(workers, 0)


@pytest.mark.parametrize("change", ["rollout", "rollout=2", "rollout=+0", "rollout=-x", "rollout=+x", "=+1"])
def test_a_change_is_role_equals_plus_or_minus_n(change):
    if change == "=+1":
        assert parse_change(change) == ("", 1)  # the role is checked by the command
        return
    with pytest.raises(ValueError, match="ROLE=\\+N or ROLE=-N"):
        parse_change(change)
    assert parse_change("rollout=+3") == ("rollout", 3) and parse_change("rollout=-2") == ("rollout", -2)


def test_a_scale_down_drains_the_newest_engines_and_drops_them_from_the_effective_config(tmp_path):
    effective = tmp_path / "config.yaml"
    workers = {"rollout-0": {}, "rollout-10": {"port": 8210}, "rollout-2": {}}
    effective.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "rollout": {"workers": workers}}))
    (tmp_path / "run").mkdir()
    write_urls(Settings(data_dir=tmp_path),
               {rid: f"http://127.0.0.1:{9400 + i}/metrics" for i, rid in enumerate(workers)})
    stopped: list[str] = []
    assert drain_engines(effective, 2, stopped.append) == ["rollout-2", "rollout-10"] == stopped
    assert yaml.safe_load(effective.read_text())["rollout"]["workers"] == {"rollout-0": {}}
    assert list(listed_urls(Settings(data_dir=tmp_path))) == ["rollout-0"]  # Ray's drained leave metrics.json too
    with pytest.raises(ValueError, match="one stays"):
        removed_engines({"rollout-0": {}}, 1)
    with pytest.raises(ValueError, match="named rollout-<n>"):
        removed_engines({"rollout-0": {}, "fast": {}, "slow": {}}, 2)


def test_a_scale_down_can_name_the_engines_it_drains(tmp_path):
    """`scale rollout=-1 --engine rollout-0`: an operator drains the engine on a node to be reclaimed, not the
    newest; on one machine the supervisor then drains what the config no longer names (`reconcile`)."""
    effective = tmp_path / "config.yaml"
    workers = {"rollout-0": {}, "rollout-1": {}, "rollout-2": {}}
    effective.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "rollout": {"workers": workers}}))
    (tmp_path / "run").mkdir()
    stopped: list[str] = []
    assert drain_engines(effective, 1, stopped.append, ("rollout-0",)) == ["rollout-0"] == stopped
    assert list(yaml.safe_load(effective.read_text())["rollout"]["workers"]) == ["rollout-1", "rollout-2"]
    assert changed_services(effective, "rollout", -1, ("rollout-2",)) == ["rollout-2"]  # the local path's edit
    assert list(yaml.safe_load(effective.read_text())["rollout"]["workers"]) == ["rollout-1"]
    for named, count, message in [(("rollout-0", "rollout-1"), 1, "name 1 different ones"),
                                  (("rollout-1", "rollout-1"), 2, "name 2 different ones"),
                                  (("rollout-9",), 1, "no engine rollout-9 in the stack"),
                                  (("rollout-0",), 3, "one stays")]:
        with pytest.raises(ValueError, match=message):
            removed_engines(workers, count, named)
    with pytest.raises(ValueError, match="only with rollout=-N"):
        scale_stack(Settings(data_dir=tmp_path), 1, print, "rollout", ("rollout-1",))
    with pytest.raises(ValueError, match="only with rollout=-N"):
        scale_stack(Settings(data_dir=tmp_path), -1, print, "assembler", ("rollout-1",))


def test_scale_writes_the_new_engines_into_the_effective_config_and_starts_each_with_its_request(tmp_path):
    effective = tmp_path / "run" / "config.yaml"
    effective.parent.mkdir()
    effective.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path), "rollout": {"workers": {"rollout-0": {"hardware_tags": ["h100"]}}},
        "cluster": {"resources": {"rollout": {"cpus": 2}}}}))
    placement = RayPlacementStandIn(["rollout-0"])
    assert scale_engines(effective, 1, placement) == ["rollout-1"]
    assert yaml.safe_load(effective.read_text())["rollout"]["workers"] == {
        "rollout-0": {"hardware_tags": ["h100"]}, "rollout-1": {"hardware_tags": ["h100"]}}
    (spec,) = placement.started
    assert spec.name == "rollout-1" and spec.argv[-2:] == ["--resource-id", "rollout-1"]
    assert str(effective) in spec.argv and spec.ready is not None
    assert spec.resources.cpus == 2 and spec.resources.custom == {"h100": 1.0}
    assert spec.env[PORT_ENV] == "9400" and listed_urls(Settings(data_dir=tmp_path)) == {  # its own /metrics
        "rollout-1": "http://127.0.0.1:9400/metrics"}


def test_scale_assembler_changes_the_worker_count_and_one_always_stays():
    data: dict = {"assembler": {"app_id": "a"}}
    assert scale_assemblers(data, 2) == 3 and data["assembler"] == {"app_id": "a", "workers": 3}
    assert scale_assemblers(data, -2) == 1
    with pytest.raises(ValueError, match="one stays"):
        scale_assemblers(data, -1)
    assert scale_assemblers({}, 1) == 2  # no section: one worker, the default


def test_scale_agents_changes_the_named_pool_and_asks_which_when_there_are_several():
    pools = [{"function": "m:f", "pool": "demo"}, {"function": "m:g", "team": "red", "pool": "fast", "workers": 2}]
    data = {"agent_pools": pools}
    assert scale_pool(data, "red-fast", -1, "default") == 1 and pools[1]["workers"] == 1
    assert scale_pool(data, "default-demo", 2, "default") == 3 and pools[0]["workers"] == 3
    with pytest.raises(ValueError, match="name one, e.g. agents:default-demo"):
        scale_pool(data, None, 1, "default")
    with pytest.raises(ValueError, match="no agent pool 'blue-x'"):
        scale_pool(data, "blue-x", 1, "default")
    with pytest.raises(ValueError, match="one stays"):
        scale_pool(data, "red-fast", -1, "default")
    only = {"agent_pools": [{"function": "m:f"}]}
    assert scale_pool(only, None, 1, "default") == 2 and only["agent_pools"][0]["workers"] == 2
    with pytest.raises(ValueError, match="no agent pool"):
        scale_pool({}, None, 1, "default")


def test_the_roles_scale_names():
    assert split_role("agents:red-fast") == ("agents", "red-fast") and split_role("assembler") == ("assembler", None)
    for role in ("trainer", "assembler:x", "agents:", "proxy"):
        with pytest.raises(ValueError, match="scale rollout, assembler or agents"):
            split_role(role)


def test_a_count_change_names_the_services_it_adds_or_drains_and_keeps_the_first_ones_names(tmp_path):
    effective = tmp_path / "run" / "config.yaml"
    effective.parent.mkdir()
    effective.write_text(yaml.safe_dump({
        "data_dir": str(tmp_path), "services": {"assembler": True, "agents": True},
        "rollout": {"workers": {"rollout-0": {}}}, "agent_pools": [{"function": "m:f", "team": "red", "pool": "p"}]}))
    assert changed_services(effective, "assembler", 2) == ["assembler-1", "assembler-2"]
    assert changed_services(effective, "agents", 1) == ["agents-red-p-1"]
    assert changed_services(effective, "assembler", -1) == ["assembler-2"]
    assert changed_services(effective, "agents:red-p", -1) == ["agents-red-p-1"]
    data = yaml.safe_load(effective.read_text())
    assert data["assembler"]["workers"] == 2 and data["agent_pools"][0]["workers"] == 1
    assert changed_services(effective, "rollout", 1) == ["rollout-1"]  # engines: entries of their own


class RayPlacementStandIn:
    """What the advice on Ray uses of a `RayPlacement` (a stand-in: no Ray; the Ray loop's test places for real)."""

    def __init__(self, running: list[str], refuse: str = ""):
        self.states = {name: ServiceState(name, state="running") for name in running}
        self.calls: list[tuple[str, str]] = []
        self.started: list[ServiceSpec] = []
        self.refuse = refuse  # check_feasible's refusal, when no node of the cluster could hold the engine
        self.no_node_joins = False  # a cluster that adds nodes (`cluster.autoscaler`) added none in time

    def start(self, spec: ServiceSpec) -> None:
        self.calls.append(("start", spec.name))
        self.started.append(spec)
        if self.refuse:
            raise PlacementError(self.refuse)
        self.states[spec.name] = ServiceState(spec.name, state="running")
        if self.no_node_joins:
            self.states[spec.name].state = "failed"
            raise NoNodeJoined(f"{spec.name}: no node that can hold it joined")

    def stop(self, name: str) -> None:
        self.calls.append(("stop", name))

    def write_state(self) -> None:
        self.calls.append(("write_state", ""))


def test_the_advice_on_ray_places_rollout_only_engines_and_drains_the_newest(tmp_path):
    effective = tmp_path / "run" / "config.yaml"
    effective.parent.mkdir()
    effective.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "rollout": {
        "workers": {"rollout-0": {"capability_tags": ["rollout", "train"]}}}}))
    placement = RayPlacementStandIn(["rollout-0"])
    said: list[str] = []
    actor = AdviceActor(effective, AdviceActor.on_ray(effective, placement), said.append, engines=(1, 2))
    row = {"kind": "scheduler", "figures": {"autoscale_change": 1}, "heartbeat_age_s": 0.0, "note": "advice +1"}
    assert actor.step([row], now_s=100.0) == 1
    workers = yaml.safe_load(effective.read_text())["rollout"]["workers"]
    assert workers["rollout-1"]["capability_tags"] == ["rollout"]  # never lent to training (see test_scale_local)
    assert placement.calls == [("start", "rollout-1"), ("write_state", "")] and said == ["carrying out advice +1"]
    row["figures"]["autoscale_change"] = -1
    assert actor.step([row], now_s=actor.done_at + 30.0) == -1
    assert placement.calls[-2:] == [("stop", "rollout-1"), ("write_state", "")] and list(placement.states) == [
        "rollout-0"]
    assert list(yaml.safe_load(effective.read_text())["rollout"]["workers"]) == ["rollout-0"]
    placement.refuse = "rollout-1 asks for 1 node_f, which no node of the cluster has"
    row["figures"]["autoscale_change"] = 1
    assert actor.step([row], now_s=actor.done_at + 30.0) == 0  # refused and said: `up --ray` goes on
    assert said[-1] == f"autoscale advice not carried out: {placement.refuse}"
    assert list(yaml.safe_load(effective.read_text())["rollout"]["workers"]) == ["rollout-0"]  # never ran: forgotten


def test_engines_no_node_joined_for_leave_the_config_and_the_state_and_the_advice_goes_on(tmp_path):
    """`cluster.autoscaler`: the placement waited for a node to join and none did (`NoNodeJoined`). The engines
    of that change never ran: none of them stays in the config (where the advice's limits count them) or the
    stack's state, and the advice is asked again only after its settle time."""
    effective = tmp_path / "run" / "config.yaml"
    effective.parent.mkdir()
    effective.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "rollout": {"workers": {"rollout-0": {}}}}))
    placement = RayPlacementStandIn(["rollout-0"])
    placement.no_node_joins = True
    said: list[str] = []
    actor = AdviceActor(effective, AdviceActor.on_ray(effective, placement), said.append, engines=(1, 4))
    row = {"kind": "scheduler", "figures": {"autoscale_change": 2}, "heartbeat_age_s": 0.0, "note": "advice +2"}
    assert actor.step([row], now_s=100.0) == 0
    assert said[-1] == "autoscale advice not carried out: rollout-1: no node that can hold it joined"
    assert list(yaml.safe_load(effective.read_text())["rollout"]["workers"]) == ["rollout-0"]
    assert list(placement.states) == ["rollout-0"] and placement.calls[-1] == ("write_state", "")
    assert actor.step([row], now_s=105.0) == 0 and len(placement.started) == 1  # within the settle time


def test_scale_teacher_changes_every_taught_teams_worker_count(tmp_path):
    assert scale_teachers({}, 1) == 2
    with pytest.raises(ValueError, match="one stays"):
        scale_teachers({"teacher": {"workers": 2}}, -2)
    effective = tmp_path / "run" / "config.yaml"
    effective.parent.mkdir()
    effective.write_text(yaml.safe_dump({"data_dir": str(tmp_path), "services": {"teacher": True},
                                         "teacher": {"teams": {"red": {"url": "http://t:8000"}}}}))
    assert changed_services(effective, "teacher", 2) == ["teacher-red-1", "teacher-red-2"]
    assert changed_services(effective, "teacher", -1) == ["teacher-red-2"]
    assert yaml.safe_load(effective.read_text())["teacher"]["workers"] == 2

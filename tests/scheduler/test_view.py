"""What the policy sees: heartbeat truth, or the expected resource while a command is in flight."""

from seamlessflow.core.policies import LoadWeights, Pause, Resume, SetActive
from seamlessflow.core.resources import ResourceState
from seamlessflow.messages import CommandAck, WeightVersion
from seamlessflow.scheduler.view import ClusterView
from seamlessflow.testing.status_records import status

FLEX = ("rollout", "train")


def view() -> ClusterView:
    return ClusterView(frozenset({"rollout", "trainer"}), command_timeout_s=30.0)


def issue(v: ClusterView, command, now: float) -> int:
    epoch = v.epochs.issue(command.resource_id)
    v.on_issued(command, now)
    return epoch


def ack(rid: str, epoch: int, outcome: str = "ok") -> CommandAck:
    return CommandAck("a", rid, "c", "set_active", epoch, outcome, "", 1.0, "default", "default", 0)


def test_in_flight_command_shows_expected_role_as_switching():
    v = view()
    v.on_status(status("r1", 0, "rollout", tags=FLEX), now=0.0)
    issue(v, SetActive("r1", "train"), now=1.0)
    v.on_status(status("r1", 1, "rollout", tags=FLEX), now=1.5)  # heartbeat from before it applied the command
    [seen] = v.resources(now=2.0)
    assert (seen.active, seen.state, seen.last_heartbeat) == ("train", ResourceState.SWITCHING, 1.5)


def test_ack_counts_once_a_later_heartbeat_arrives():
    v = view()
    v.on_status(status("r1", 0, "rollout", tags=FLEX), now=0.0)
    epoch = issue(v, SetActive("r1", "train"), now=1.0)
    v.on_ack(ack("r1", epoch))
    assert v.resources(now=2.0)[0].state is ResourceState.SWITCHING  # old heartbeat still describes it
    v.on_status(status("r1", 2, "train", tags=FLEX), now=2.0)
    [seen] = v.resources(now=2.0)
    assert (seen.active, seen.state) == ("train", ResourceState.ACTIVE)


def test_heartbeat_epoch_catches_up_without_ack():
    v = view()
    v.on_status(status("r0", 0, "rollout"), now=0.0)
    for command in (Pause("r0"), LoadWeights("r0", 1), Resume("r0")):
        issue(v, command, now=1.0)
    heartbeat = status("r0", 2, "rollout", version=1)
    heartbeat.epoch = 3
    v.on_status(heartbeat, now=2.0)
    [seen] = v.resources(now=2.0)
    assert (seen.state, seen.weight_version) == (ResourceState.ACTIVE, 1)


def test_rejected_or_timed_out_command_stops_blocking():
    v = view()
    v.on_status(status("r0", 0, "rollout"), now=0.0)
    epoch = issue(v, SetActive("r0", "train"), now=1.0)
    v.on_ack(ack("r0", epoch, outcome="rejected"))
    assert v.resources(now=1.0)[0].active == "rollout"
    issue(v, SetActive("r0", "train"), now=2.0)
    assert v.resources(now=2.0 + 29)[0].state is ResourceState.SWITCHING
    assert v.resources(now=2.0 + 31)[0].state is ResourceState.ACTIVE


def test_resource_that_applied_newer_epochs_moves_the_book_up():
    v = view()
    heartbeat = status("r0", 0, "rollout")
    heartbeat.epoch = 7
    v.on_status(heartbeat, now=0.0)
    assert v.epochs.issue("r0") == 8


def test_only_scheduled_kinds_and_newest_weights():
    v = view()
    v.on_status(status("proxy", 0, "proxy", kind="proxy"), now=0.0)
    assert v.tracked == {}
    v.on_trajectory(now=0.0)
    v.on_weights(WeightVersion("w", 2, "file:///w2", 2, "hf-safetensors", "t", "default", "default", 0))
    v.on_weights(WeightVersion("w", 1, "file:///w1", 1, "hf-safetensors", "t", "default", "default", 0))
    assert (v.current_version, v.trajectories_since_version, v.weights[1]) == (2, 0, "file:///w1")


def test_adapter_versions_are_no_base_weights_and_each_takes_a_batch_from_its_own_teams_backlog():
    """Found on `make up-teams`: an adapter trainer's versions raised the base's, so the scheduler sent the engines
    `load_weights` of adapter directories every tick (each failed: no HF model directory), pausing them all; with
    them kept apart, the backlog's estimate never came down and the train-capable engine stayed in `train`. Each
    team's trajectories now wait in its own adapter's backlog, and a batch is ready when one team has one."""
    v = ClusterView(frozenset({"rollout", "trainer"}), batch_trajectories=8,
                    policy_of={"red": "red-lora", "blue": "blue-lora"})
    for team, count in (("red", 20), ("blue", 6)):
        for _ in range(count):
            v.on_trajectory(now=0.0, team=team)
    assert v.trajectories_since_version == 20
    for adapter, version in (("red-lora", 3), ("blue-lora", 1), ("red-lora", 2)):
        v.on_weights(WeightVersion("w", version, f"file:///{adapter}/v{version}", version, "peft-lora", "t",
                                   "default", "default", 0, adapter=adapter))
    assert (v.current_version, v.weights) == (0, {})  # the base never moved: nothing to load into the engines
    assert v.adapter_versions == {"red-lora": 3, "blue-lora": 1}
    # red v3 took a batch of red's (red's older v2 took nothing), blue v1 all of blue's six
    assert v.backlog == {"red-lora": 20 - 8, "blue-lora": 0} and v.trajectories_since_version == 12


def test_an_adapter_trainer_that_has_read_everything_brings_its_backlog_down_to_what_it_holds():
    """Found on `make up-teams` with the training time share: the demo's tasks come again, and a trainer finishes
    untrained the groups of a task it already found too easy; the manager counts them as usable, so red's estimate
    stood at 13 while red held no sample, the train-capable engine stayed in `train` and red kept turns it could
    not use. A trainer that waited and read nothing new (`read_up`) holds its whole backlog."""
    v = ClusterView(frozenset({"rollout", "trainer"}), batch_trajectories=8,
                    policy_of={"red": "red-lora", "blue": "blue-lora"},
                    trainer_of={"trainer-0-red": "red-lora", "trainer-0-blue": "blue-lora"})
    for team in ("red",) * 13 + ("blue",) * 9:
        v.on_trajectory(now=0.0, team=team)
    v.on_status(status("trainer-0-red", 1.0, "train", kind="trainer", tags=("train",), read_up=1.0,
                       pending_samples=2.0), 1.0)
    v.on_status(status("trainer-0-blue", 1.0, "idle", kind="trainer", tags=("train",), read_up=0.0,
                       pending_samples=0.0), 1.0)  # paused: its team's records wait unread
    assert v.backlog == {"red-lora": 2, "blue-lora": 9}
    v.on_trajectory(now=2.0, team="red")
    assert v.backlog["red-lora"] == 3  # arrivals count on from there


def test_hardware_tags_reach_the_resources_the_scheduler_sees():
    v = view()
    v.on_status(status("r0", 0, "rollout", hardware=("bandwidth", "h20")), now=0.0)
    [seen] = v.resources(now=1.0)
    assert seen.hardware_tags == frozenset({"bandwidth", "h20"}) and seen.tags == frozenset({"rollout"})


def test_a_proxy_paused_by_its_newest_command_is_stranded_until_a_newer_one_is_issued():
    v = view()
    paused = status("proxy", 0, "proxy", state="paused", kind="proxy")
    paused.epoch = 9
    v.on_status(paused, now=0.0)  # a restarted scheduler reads the pause of one that died mid-update
    assert v.stranded_proxies() == {"proxy"}
    v.epochs.issue("proxy")  # the resume (epoch 10) is in flight: the old heartbeat no longer counts
    assert v.stranded_proxies() == frozenset()
    v.on_status(status("proxy", 1, "proxy", kind="proxy"), now=1.0)
    assert v.stranded_proxies() == frozenset()

from dataclasses import replace

from seamlessflow.core.control import Capabilities, CommandKind, ControlProtocol, Outcome, Reply
from seamlessflow.core.resources import ResourceState
from seamlessflow.messages import ControlCommand

EVERYTHING = Capabilities(dict.fromkeys(CommandKind), frozenset({"rollout", "train", "idle"}))


def command(epoch, name="set_active", event_id=None, **fields):
    return ControlCommand(event_id or f"c{epoch}", "r0", epoch, name, "t", "r", 0, **fields)


def run(protocol, cmd, outcome=Outcome.OK):
    """Admit `cmd`; if admitted, settle it with `outcome` (what the resource's engine did)."""
    reply = protocol.admit(cmd)
    return reply if reply is not None else protocol.settle(cmd, Reply(outcome))


def test_equal_epoch_is_stale_and_only_newer_ones_apply():
    p = ControlProtocol("r0", EVERYTHING, "rollout")
    assert run(p, command(2, role="train")).ok and p.view.active == "train"
    assert run(p, command(2, role="idle", event_id="other")).outcome is Outcome.IGNORED_STALE
    assert run(p, command(1, role="idle")).outcome is Outcome.IGNORED_STALE
    assert p.view.active == "train" and p.epoch == 2


def test_duplicate_event_id_is_ignored_and_memory_is_bounded():
    p = ControlProtocol("r0", EVERYTHING, "rollout", memory=2)
    run(p, command(1, role="train"))
    assert run(p, command(1, role="train")).reason == "duplicate delivery of a command already handled"
    run(p, command(2, "pause")), run(p, command(3, "resume"))
    assert "c1" not in p._seen and len(p._seen) == 2  # forgotten, and its epoch still makes it stale
    assert "epoch 1" in run(p, command(1, role="train")).reason


def test_rejected_and_failed_commands_consume_their_epoch():
    p = ControlProtocol("r0", Capabilities({CommandKind.SET_ACTIVE: None}, frozenset({"train"})), "train")
    assert run(p, command(1, "pause")).outcome is Outcome.REJECTED
    assert run(p, command(2, role="rollout")).outcome is Outcome.REJECTED
    assert run(p, command(3, role="train"), Outcome.FAILED).outcome is Outcome.FAILED
    assert p.epoch == 3 and run(p, command(3, role="train", event_id="again")).outcome is Outcome.IGNORED_STALE


def test_commands_move_the_state_through_the_transition_table():
    p = ControlProtocol("r0", EVERYTHING, "rollout")
    run(p, command(1, "pause"))
    assert p.view.state is ResourceState.PAUSED
    run(p, command(2, "load_weights", weight_version=3))
    assert (p.view.state, p.view.weight_version) == (ResourceState.PAUSED, 3)
    run(p, command(3, role="train"))  # paused -> switching -> active
    assert (p.view.state, p.view.active) == (ResourceState.ACTIVE, "train")
    p.view = replace(p.view, state=ResourceState.STARTING)  # not yet up: the table allows only active/failed
    assert run(p, command(4, "pause")).reason.startswith("not allowed now")


def test_role_limits_and_after_shutdown_everything_is_rejected():
    caps = Capabilities({CommandKind.PAUSE: frozenset({"rollout"}), CommandKind.SHUTDOWN: None,
                         CommandKind.SET_ACTIVE: None}, frozenset({"rollout", "idle"}))
    p = ControlProtocol("r0", caps, "idle")
    assert "cannot pause in role 'idle'" in run(p, command(1, "pause")).reason
    assert run(p, command(2, "shutdown")).ok and p.stopping
    assert run(p, command(3, role="rollout")).reason == "shutting down"


def test_restore_carries_out_only_the_newest_command_never_a_shutdown():
    p = ControlProtocol("r0", EVERYTHING, "rollout")
    history = [command(1, role="train"), command(3, "pause"), command(2, role="idle"),
               ControlCommand("x", "r9", 9, "pause", "t", "r", 0)]  # another resource's key
    newest = p.restore(history)
    assert newest.epoch == 3 and run(p, newest).ok and p.epoch == 3
    fresh = ControlProtocol("r0", EVERYTHING, "rollout")
    assert fresh.restore(history + [command(4, "shutdown")]) is None
    assert fresh.epoch == 4 and not fresh.stopping and fresh.view.state is ResourceState.ACTIVE
    assert run(fresh, command(4, "shutdown")).outcome is Outcome.IGNORED_STALE


def test_broadcast_reaches_every_resource_unless_it_opts_out():
    star = ControlCommand("s", "*", 1, "pause", "t", "r", 0)
    assert ControlProtocol("r0", EVERYTHING, "rollout").addressed(star)
    assert not ControlProtocol("r0", EVERYTHING, "rollout", aliases=()).addressed(star)


def test_restore_keeps_to_its_generation_and_still_counts_older_epochs():
    """A new start of the stack (another generation) must not carry out the previous run's newest command
    (a worker left in train would wait for a scheduler that never sends it back); a service restarted
    inside the running stack (same generation) restores as before."""
    history = [command(3, role="train", generation="g1"), command(1, role="idle", generation="g1")]
    new_start = ControlProtocol("r0", EVERYTHING, "rollout", generation="g2")
    assert new_start.restore(history) is None
    assert new_start.epoch == 3 and new_start.view.active == "rollout"
    assert run(new_start, command(3, role="train", event_id="late", generation="g2")).outcome is Outcome.IGNORED_STALE
    assert run(new_start, command(4, role="train", generation="g2")).ok  # its own scheduler's commands apply

    restarted = ControlProtocol("r0", EVERYTHING, "rollout", generation="g1")
    assert restarted.restore(history).epoch == 3
    unlabelled = ControlProtocol("r0", EVERYTHING, "rollout")  # run by hand: restores only unlabelled commands
    assert unlabelled.restore(history) is None and unlabelled.restore([command(5, "pause")]).epoch == 5

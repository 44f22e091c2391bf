from seamlessflow.messages import ControlCommand
from seamlessflow.trainer.commands import ControlState


def command(epoch, name="set_active", role=None):
    return ControlCommand(event_id=f"c{epoch}", resource_id="trainer-0", epoch=epoch, command=name, team="t",
                          run="r", created_at_ms=0, role=role)


def test_set_active_switches_role_and_acks_ok():
    state = ControlState("trainer-0", "t", "r", role="train")
    decision = state.decide(command(1, role="idle"))
    assert decision.role == "idle" and state.role == "idle"
    assert decision.ack.outcome == "ok" and decision.ack.command_id == "c1" and decision.ack.epoch == 1


def test_stale_epoch_is_ignored():
    state = ControlState("trainer-0", "t", "r", role="train")
    state.decide(command(5, role="idle"))
    decision = state.decide(command(4, role="train"))
    assert decision.role is None and state.role == "idle"
    assert decision.ack.outcome == "ignored_stale"


def test_rollout_role_and_pause_are_rejected_shutdown_accepted():
    state = ControlState("trainer-0", "t", "r", role="train")
    assert state.decide(command(1, role="rollout")).ack.outcome == "rejected"
    assert state.decide(command(2, name="pause")).ack.outcome == "rejected"
    assert state.role == "train"
    decision = state.decide(command(3, name="shutdown"))
    assert decision.shutdown and decision.ack.outcome == "ok"

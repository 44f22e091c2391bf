import pytest

from seamlessflow.core.resources import (
    EpochBook,
    IllegalTransition,
    ResourceState,
    command_is_fresh,
    heartbeat_expired,
    make_resource,
    transition,
)


def test_tags_say_what_a_resource_can_do():
    flex = make_resource("r0", "rollout", "train")
    gen = make_resource("r1", "rollout")
    assert flex.flexible and flex.can("train")
    assert not gen.flexible and not gen.can("train")


def test_transition_table_allows_the_life_cycle():
    r = make_resource("r0", "rollout")
    for state in (ResourceState.ACTIVE, ResourceState.SWITCHING, ResourceState.ACTIVE, ResourceState.PAUSED,
                  ResourceState.ACTIVE, ResourceState.FAILED, ResourceState.STARTING):
        r = transition(r, state)
    assert r.state is ResourceState.STARTING


def test_transition_table_refuses_a_failed_resource_coming_back_active():
    failed = make_resource("r0", "rollout", state=ResourceState.FAILED)
    with pytest.raises(IllegalTransition):
        transition(failed, ResourceState.ACTIVE)


def test_heartbeat_expires_only_after_the_timeout():
    r = make_resource("r0", "rollout", state=ResourceState.ACTIVE, last_heartbeat=100.0)
    assert not heartbeat_expired(r, now=110.0, timeout_s=10.0)
    assert heartbeat_expired(r, now=110.5, timeout_s=10.0)


def test_epochs_grow_per_resource_and_stale_acks_are_ignored():
    book = EpochBook()
    assert [book.issue("a"), book.issue("a"), book.issue("b")] == [1, 2, 1]
    assert book.pending("a")
    assert not book.ack("a", 1)  # superseded by epoch 2
    assert book.pending("a")
    assert book.ack("a", 2)
    assert not book.pending("a")


def test_epoch_book_rebuilt_after_restart_continues_above_old_epochs():
    book = EpochBook(issued={"a": 7})
    assert book.issue("a") == 8


def test_resource_applies_only_newer_commands():
    assert command_is_fresh(3, last_applied_epoch=2)
    assert not command_is_fresh(2, last_applied_epoch=2)
    assert not command_is_fresh(1, last_applied_epoch=2)

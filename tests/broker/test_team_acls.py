"""Teams as tenants on a cluster that enforces ACLs (issue #45): red's principal never reads, writes or joins
what is blue's, under the recipe of `docs/operations/teams.md` ("Teams on a real cluster").

One SASL/PLAIN KRaft node with the StandardAuthorizer (`seamlessflow/testing/secured_broker.py`); the admin
creates both teams' topics (prefixes `red.sf`, `blue.sf`), grants the recipe's prefixed ACLs and writes each
team a trajectory, an adapter version and an eval result. The teams then use the project's Kafka layer as
their services do. Every refusal is asserted by its error code: a read that merely returns nothing proves
nothing. The last two tests are what the history reader (`seamlessflow.kafka.reader`) first did wrong here: its
throwaway group lay outside the team's prefix (refused, even on the team's own topics), and it read a refused
topic as an empty one.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    ResourcePatternType,
    ResourceType,
)

from seamlessflow.config import Settings
from seamlessflow.kafka.admin import admin_client, ensure_topics
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.fencing import RoleRefused, RoleWriter
from seamlessflow.kafka.io import DeliveryFailed, MessageProducer, read_topic
from seamlessflow.kafka.subscriber import Subscriber
from seamlessflow.messages import EvalResult, Trajectory, WeightVersion, new_id, now_ms
from seamlessflow.testing.scheduler_fakes import trajectory
from seamlessflow.testing.secured_broker import SecuredBroker
from seamlessflow.topics import Topics

TEAMS = ("red", "blue")
DATA = ("trajectories", "weights", "eval")  # a team's trajectories, adapter versions and evals
ALL_ACLS = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                            AclOperation.ANY, AclPermissionType.ANY)  # None matches any (the stubs say str)


def recipe(team: str) -> list[AclBinding]:
    """The docs' grants, all PREFIXED `<team>.sf.`: READ/WRITE/DESCRIBE on TOPIC, READ on GROUP, WRITE on
    TRANSACTIONAL_ID (a role's writer, e.g. the trainer publishing adapter versions). No IDEMPOTENT_WRITE:
    since Kafka 3.0 WRITE on a topic lets an idempotent producer start (KIP-679)."""
    grants = [(ResourceType.TOPIC, op) for op in (AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE)]
    grants += [(ResourceType.GROUP, AclOperation.READ), (ResourceType.TRANSACTIONAL_ID, AclOperation.WRITE)]
    return [AclBinding(kind, f"{team}.sf.", ResourcePatternType.PREFIXED, f"User:{team}", "*", op,
                       AclPermissionType.ALLOW) for kind, op in grants]


def grant(admin_settings: Settings, bindings: list[AclBinding], timeout_s: float = 30) -> None:
    """Creates the ACLs and waits until the broker's authorizer lists them (they apply asynchronously)."""
    admin = admin_client(admin_settings)
    for future in admin.create_acls(bindings).values():
        future.result(timeout=timeout_s)
    deadline = time.monotonic() + timeout_s
    while len(admin.describe_acls(ALL_ACLS).result(timeout=timeout_s)) < len(bindings):
        assert time.monotonic() < deadline, "the ACLs did not reach the authorizer"
        time.sleep(0.05)


def records_of(team: str) -> dict[str, Any]:
    adapter = WeightVersion(new_id(), 3, f"file:///adapters/{team}/v3", 3, "peft-lora", "trainer-0", team,
                            "default", now_ms(), adapter=f"{team}-lora")
    evaluated = EvalResult(new_id(), 3, "calculator", 0.5, 0.5, 12.0, 24, team, "default", now_ms(), now_ms())
    return {"trajectories": dataclasses.replace(trajectory("g1", f"{team}-session"), team=team),
            "weights": adapter, "eval": evaluated}


RECORDS = {team: records_of(team) for team in TEAMS}  # what the admin writes to each team's topics


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecuredBroker]:
    with SecuredBroker(tmp_path_factory.mktemp("secured"), {"red": "red-secret", "blue": "blue-secret"}) as broker:
        grant(broker.client_settings, [binding for team in TEAMS for binding in recipe(team)])
        for team in TEAMS:
            as_admin = broker.client_settings.with_overrides(topic_prefix=f"{team}.sf", team=team)
            ensure_topics(as_admin)
            producer = MessageProducer(as_admin, codec_for(as_admin))
            for kind, message in RECORDS[team].items():
                producer.send_and_wait(getattr(Topics(as_admin), kind), "k", message)
        yield broker


def as_team(cluster: SecuredBroker, user: str, team: str | None = None) -> Settings:
    """`user`'s credentials with `team`'s topic prefix (by default its own)."""
    team = team or user
    return cluster.settings_for(user).with_overrides(topic_prefix=f"{team}.sf", team=team)


def first_record(subscriber: Subscriber, timeout_s: float = 20) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for record in subscriber.poll(0.5):
            return record.message
    raise AssertionError("no record came")


def refused(settings: Settings, topic: str, group: str) -> KafkaError:
    """The error a group member of `group` subscribed to `topic` gets (it must get one)."""
    subscriber = Subscriber(settings, codec_for(settings), None, group_id=group, errors="raise")
    try:
        subscriber.subscribe(topic)
        with pytest.raises(KafkaException) as caught:
            first_record(subscriber)
        return caught.value.args[0]
    finally:
        subscriber.close()


def test_a_team_reads_its_own_trajectories_adapter_versions_and_evals(cluster: SecuredBroker) -> None:
    red = as_team(cluster, "red")
    for kind in DATA:
        subscriber = Subscriber(red, codec_for(red), None, group_id="red.sf.history", errors="raise")
        subscriber.follow(getattr(Topics(red), kind))
        message, written = first_record(subscriber), RECORDS["red"][kind]
        subscriber.close()
        assert (type(message), message.event_id, message.team) == (type(written), written.event_id, "red")
        assert message == written or kind == "trajectories"  # whole (`adapter` too); logprobs are float32


def test_another_teams_trajectories_adapter_versions_and_evals_are_refused(cluster: SecuredBroker) -> None:
    red, blue_topics = as_team(cluster, "red"), Topics(as_team(cluster, "blue"))
    for kind in DATA:
        error = refused(red, getattr(blue_topics, kind), group="red.sf.snoop")
        assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, (kind, error)


def test_a_team_cannot_write_another_teams_trajectories(cluster: SecuredBroker) -> None:
    red = as_team(cluster, "red")
    producer = MessageProducer(red, codec_for(red))
    producer.send_and_wait(Topics(red).trajectories, "g2", trajectory("g2", "red-more"))  # its own: fine
    with pytest.raises(DeliveryFailed, match="TOPIC_AUTHORIZATION_FAILED"):
        producer.send_and_wait(Topics(as_team(cluster, "blue")).trajectories, "g2", trajectory("g2", "red-forged"))


def test_a_team_joins_groups_under_its_prefix_only(cluster: SecuredBroker) -> None:
    red = as_team(cluster, "red")
    error = refused(red, Topics(red).trajectories, group="blue.sf.blue.default.trainer")
    assert error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    member = Subscriber(red, codec_for(red), None, group_id="red.sf.red.default.trainer", errors="raise")
    member.subscribe(Topics(red).trajectories)
    assert isinstance(first_record(member), Trajectory)
    member.close()


def test_a_team_holds_its_own_writer_roles_and_cannot_take_another_teams(cluster: SecuredBroker) -> None:
    """A role's writer fences older writers of its transactional id: red must never fence blue's trainer."""
    red = as_team(cluster, "red")
    writer = RoleWriter(red, codec_for(red), "trainer.trainer-0", timeout_s=20)
    writer.send_and_wait(Topics(red).weights, "default", dataclasses.replace(RECORDS["red"]["weights"], version=4))
    writer.close()
    # refused, and not taken for fenced (exit code 3, "its replacement holds the role"): no one else holds it
    with pytest.raises(RoleRefused, match="Transactional Id authorization failed"):
        RoleWriter(as_team(cluster, "red", team="blue"), codec_for(red), "trainer.trainer-0", timeout_s=20)


def test_blue_is_refused_reds_trajectories_and_reads_its_own(cluster: SecuredBroker) -> None:
    blue = as_team(cluster, "blue")
    error = refused(blue, Topics(as_team(cluster, "red")).trajectories, group="blue.sf.snoop")
    assert error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, error
    subscriber = Subscriber(blue, codec_for(blue), None, group_id="blue.sf.history", errors="raise")
    subscriber.follow(Topics(blue).trajectories)
    assert first_record(subscriber).team == "blue"
    subscriber.close()


def test_the_history_reader_reads_a_teams_own_topic(cluster: SecuredBroker) -> None:
    red = as_team(cluster, "red")
    assert [r.message.team for r in read_topic(red, Topics(red).trajectories, codec_for(red))][:1] == ["red"]


def test_the_history_reader_raises_on_another_teams_topic(cluster: SecuredBroker) -> None:
    red = as_team(cluster, "red")
    with pytest.raises(KafkaException, match="TOPIC_AUTHORIZATION_FAILED"):
        list(read_topic(red, Topics(as_team(cluster, "blue")).trajectories, codec_for(red)))

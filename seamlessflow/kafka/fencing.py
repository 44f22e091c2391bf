"""One writer per role, enforced by the broker: a transactional producer whose `transactional.id` names the role.

Why: the trainer (versions, offsets, checkpoints) and the scheduler (commands, tasks) must each be single
(docs/concepts.md, "One writer per role"). A supervisor that restarts one while the old process is only
frozen (SIGSTOP, a long pause, a node cut off for a while) would otherwise get two: the old one wakes up and
publishes a version, commits offsets or issues a command from a stale view. Kafka settles it: a producer
with the same `transactional.id` calling `init_transactions` bumps the id's epoch and aborts the old one's
open transaction, and from then on the broker refuses every write and offset commit of the old producer
(PRODUCER_FENCED). Readers read `read_committed` (`clients.consumer_config`), so what the old one wrote and
did not commit is delivered to no one.

Transactions here are short: `commit` ends one after each batch of writes (a loop turn, a scheduler tick),
never across work. An open transaction holds back every `read_committed` reader of its partitions (their last
stable offset stops there), other writers' records included, until it ends, a replacement's
`init_transactions` aborts it, or the broker does after `TRANSACTION_TIMEOUT_MS` (30 s). That abort bumps the
id's epoch too: a process frozen for longer with a transaction open (milliseconds of every second) finds
itself fenced when it wakes, with no replacement, and exits; its supervisor starts it again.

A fatal error of the producer (fencing is the one expected) raises `Fenced`, and keeps raising it: the
service logs it and exits with `FENCED_EXIT_CODE` (`service_main`), since nothing it writes can be committed
any more. A refusal by the cluster's ACLs (no WRITE on the role's TRANSACTIONAL_ID, or on a topic it writes) is
fatal to librdkafka too, but no newer writer holds the role: it raises `RoleRefused` instead, an error the
service exits with as a crash, so no one reads it as "fenced: its replacement holds the role".

An abortable error (a record not delivered in time, offsets of a group generation that moved on) aborts the
transaction and raises `TransactionAborted`: nothing of it became visible, and the caller sends it again or lets
a later commit cover it.

A commit that times out is not an error to abort on: librdkafka goes on with it and lets only the same call
resume it (any other, an abort included, is refused with _CONFLICT, and the producer stays stuck: a trainer
did so for minutes after a broker kill at load 15). So the commit is made again until it ends, for up to
`COMMIT_PATIENCE_S`; by then its records were delivered or timed out (`message.timeout.ms` follows the
transaction's timeout), so it ended one way or the other. One that still has not leaves the producer unusable:
`Fenced`, and the process is replaced, whose `init_transactions` settles the transaction.

`send_offsets_to_transaction` is bounded here, not by librdkafka: when the group coordinator's broker has just
died, it can block past its own timeout, for good (librdkafka 2.16; confluentinc/librdkafka#5456, #5511: a
coordinator request's timeout is never checked, and one waiting on a dead cached coordinator is woken only by
another broker's state change). A trainer's checkpoint commit right after a broker kill hung so, for 300 s and
more, between publishing a version and naming its checkpoint. It runs in a thread of its own, waited for up to
the commit's patience; one that never returns is the same case as a commit that never ends (`Fenced`).

Every record a role writes names the writing process in a header (`WRITER_HEADER`, `host:pid`), so an audit
(or a test) sees on the topic which process wrote what.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.exit_codes import FENCED_EXIT_CODE
from seamlessflow.kafka.clients import REFUSED
from seamlessflow.kafka.io import DeliveryFailed, Headers, Key, MessageProducer, OnDelivery

__all__ = ["FENCED_EXIT_CODE", "WRITER_HEADER", "Fenced", "RoleRefused", "RoleWriter", "TransactionAborted",
           "transactional_id"]

log = logging.getLogger(__name__)

T = TypeVar("T")

WRITER_HEADER = "sf-writer"
# How long the broker lets a transaction stay open before it aborts it and fences the writer. The roles keep
# their transactions open for milliseconds (their records are sent right before each commit), so this bounds
# only the rare case of a process frozen exactly then, whose open transaction holds back the read_committed
# readers of its partitions (the status topic's heartbeats among them) until the abort. It was 8 s (below the
# scheduler's 10 s heartbeat timeout), and a trainer on a 2-core machine at load 15-20, or waiting on a
# transaction coordinator that moved with a killed broker, took longer and was fenced with no replacement;
# Kafka's default is 60 s.
TRANSACTION_TIMEOUT_MS = 30000
COMMIT_PATIENCE_S = 2 * TRANSACTION_TIMEOUT_MS / 1000  # how long a commit that timed out is resumed
BOUNDED_GRACE_S = 5.0  # how long past its own timeout a `bounded` call is waited for


class Fenced(RuntimeError):
    """This process may no longer write as its role: a newer process took it (or its transactional producer
    hit another fatal error). Nothing it writes can be committed: stop."""


class RoleRefused(RuntimeError):
    """The cluster's ACLs do not let this principal write as the role: a setup error, not a newer writer."""


REFUSALS = REFUSED | {KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED}


class TransactionAborted(DeliveryFailed):
    """The open transaction was aborted (none of it is visible); the writer goes on with a new one."""


class StillInProgress(DeliveryFailed):
    """A transactional call timed out and goes on in librdkafka: only the same call may resume it."""


def bounded(call: Callable[[float], T], timeout_s: float, grace_s: float) -> T:
    """`call(timeout_s)` in a thread of its own, waited for up to `timeout_s` + `grace_s`; `StillInProgress` if it
    has not returned by then (the thread is left to it: a daemon, it holds no exit back)."""
    done = threading.Event()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append((True, call(timeout_s)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as it is
            outcome.append((False, exc))
        done.set()

    threading.Thread(target=run, name="bounded-kafka-call", daemon=True).start()
    if not done.wait(timeout_s + grace_s):
        raise StillInProgress(f"a call did not return within {timeout_s + grace_s:.0f} s (its timeout "
                              f"{timeout_s:.0f} s): librdkafka#5456")
    returned, value = outcome[0]
    if not returned:
        raise value
    return value


def transactional_id(settings: Settings, role: str) -> str:
    """`<topic_prefix>.<team>.<run>.<role>`: one per role of one stack's run, as the trainer's group id."""
    return f"{settings.topic_prefix}.{settings.team}.{settings.run}.{role}"


def writer_name() -> str:
    """This process, as the writer header names it."""
    return f"{socket.gethostname()}:{os.getpid()}"


class RoleWriter(MessageProducer):
    """A `MessageProducer` for a role that must be single: every `send` goes into a transaction that `commit`
    (or `flush`, `send_and_wait`, `deliver`) ends. Constructing one fences every older writer of the role.
    Not thread-safe across transactions: one thread (the role's loop) sends and commits."""

    def __init__(self, settings: Settings, codec: Codec, role: str, timeout_s: float = 60.0, **extra: Any) -> None:
        self.transactional_id = transactional_id(settings, role)
        self.writer = writer_name()
        self._open = False
        self._fenced: Fenced | RoleRefused | None = None  # fatal: raised again by every later call
        super().__init__(settings, codec, **{"transactional.id": self.transactional_id, "enable.idempotence": True,
                                             "transaction.timeout.ms": TRANSACTION_TIMEOUT_MS, **extra})
        self._call(self._producer.init_transactions, timeout_s)  # fences the older writers, aborts what they left
        log.info("%s holds role %s", self.writer, self.transactional_id)

    def send_bytes(self, topic: str, key: Key, value: bytes | None, on_delivery: OnDelivery | None = None,
                   headers: Headers = None, block: bool = True, timestamp_ms: int = 0) -> None:
        """Into the open transaction (begun here when none is), with the writer header."""
        self._begin()
        super().send_bytes(topic, key, value, on_delivery, [*(headers or []), (WRITER_HEADER, self.writer)], block,
                           timestamp_ms)

    def commit(self, timeout_s: float = 30.0, offsets: list[TopicPartition] | None = None,
               group_metadata: object = None) -> None:
        """Ends the open transaction: its records, and `offsets` for the consumer group `group_metadata` names
        (`Consumer.consumer_group_metadata()`), become visible together. Nothing to do when none is open."""
        if self._fenced is not None:
            raise self._fenced
        patience_s = max(timeout_s, COMMIT_PATIENCE_S)
        if offsets:
            self._begin()
            send = self._producer.send_offsets_to_transaction
            self._resumed(lambda s: bounded(lambda t: send(offsets, group_metadata, t), s, BOUNDED_GRACE_S),
                          patience_s)
        if self._open:
            try:
                self._resumed(self._producer.commit_transaction, patience_s)
            except (TransactionAborted, Fenced):
                raise
            except DeliveryFailed as exc:  # refused outright (not a timeout): start afresh
                self._abort()
                raise TransactionAborted(f"{self.transactional_id}: commit refused: {exc}") from exc
            self._open = False

    def flush(self, timeout_s: float = 30.0) -> None:
        """A role's records are durable, and visible, once their transaction commits."""
        self.commit(timeout_s)

    def deliver(self, topic: str, key: Key, message: Any, patience_s: float = 300.0, wait_s: float = 30.0) -> None:
        """Sends and commits one record that must outlast a broker restart (a weight version): an aborted or
        timed-out transaction is sent again until `patience_s` has passed; `Fenced` at once. A copy that did
        land is the same record (encoded from the same dataclass)."""
        deadline = time.monotonic() + patience_s
        while True:
            try:
                self.send(topic, key, message)
                self.commit(wait_s)
                return
            except DeliveryFailed as exc:
                if time.monotonic() >= deadline:
                    raise
                log.warning("%s: record not committed (%s); sending it again", topic, exc)
                time.sleep(1.0)

    def close(self, timeout_s: float = 10.0) -> int:
        """Commits what is open and lets librdkafka's threads go; 0 (a transaction has no stragglers)."""
        self.commit(timeout_s)
        del self._producer
        return 0

    def _begin(self) -> None:
        if self._fenced is not None:
            raise self._fenced
        if not self._open:
            self._call(lambda _s: self._producer.begin_transaction(), 0.0)
            self._open = True

    def _resumed(self, call: Callable[[float], T], patience_s: float) -> T:
        """A transactional call made again until it ends (the module's docstring); `Fenced` if it never does."""
        try:
            return self._call(call, patience_s)
        except StillInProgress as exc:
            self._fenced = Fenced(f"{self.writer}: a transaction of {self.transactional_id} neither committed nor "
                                  f"failed in {patience_s:.0f} s ({exc}); a new process settles it")
            log.error("%s", self._fenced)
            raise self._fenced from exc

    def _call(self, call: Callable[[float], T], timeout_s: float) -> T:
        """`call(seconds left)`, again after a retriable error until `timeout_s` (then `StillInProgress`); a
        refusal as this module's exceptions."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                return call(max(deadline - time.monotonic(), 1.0))
            except KafkaException as exc:
                error = exc.args[0] if exc.args else None
                if (isinstance(error, KafkaError) and error.retriable() and not error.fatal()
                        and not error.txn_requires_abort()):
                    if time.monotonic() < deadline:
                        time.sleep(0.2)
                        continue
                    raise StillInProgress(f"{self.transactional_id}: {error.str()}") from exc
                raise self._failed(exc) from exc

    def _failed(self, exc: KafkaException) -> Exception:
        """Fatal (librdkafka's judgement: PRODUCER_FENCED is, a transaction the broker timed out is only
        abortable): `Fenced`, for good; abortable: the transaction aborted; else a plain `DeliveryFailed`."""
        error = exc.args[0] if exc.args else None
        if isinstance(error, KafkaError) and error.code() in REFUSALS:
            self._fenced = RoleRefused(f"{self.writer} may not write as {self.transactional_id}: {error.str()} (the "
                                       "cluster's ACLs: docs/operations/teams.md, 'Teams on a real cluster')")
            log.error("%s", self._fenced)
            return self._fenced
        if isinstance(error, KafkaError) and error.fatal():
            self._fenced = Fenced(f"{self.writer} lost role {self.transactional_id}: {error.str()}")
            log.error("%s", self._fenced)
            return self._fenced
        if isinstance(error, KafkaError) and error.txn_requires_abort():
            self._abort()
            return TransactionAborted(f"{self.transactional_id}: transaction aborted: {error.str()}")
        return DeliveryFailed(f"{self.transactional_id}: {exc}")

    def _abort(self) -> None:
        try:
            self._producer.abort_transaction(30.0)
        except KafkaException as exc:  # a fatal error here shows again at the next begin
            log.warning("%s: abort failed: %s", self.transactional_id, exc)
        self._open = False

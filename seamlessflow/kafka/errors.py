"""Which Kafka errors pass by themselves, and the one exception type callers outside this package catch.

A leader election, a moving group coordinator or a just-created topic answers with an error for a
moment; callers retry those (`retry_transient`) or try again at their next turn (`transient`), and let
every other error through.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from confluent_kafka import KafkaError, KafkaException

__all__ = ["KafkaException", "TRANSIENT", "commit_refused", "retry_transient", "transient"]

T = TypeVar("T")

TRANSIENT = {KafkaError.NOT_LEADER_FOR_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError.UNKNOWN_TOPIC_OR_PART,
             KafkaError._TIMED_OUT, KafkaError.REQUEST_TIMED_OUT, KafkaError._TRANSPORT, KafkaError._WAIT_COORD,
             KafkaError.COORDINATOR_NOT_AVAILABLE, KafkaError.NOT_COORDINATOR, KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
             KafkaError.REBALANCE_IN_PROGRESS,
             KafkaError._DESTROY_BROKER,  # a request in flight to a broker that just died (seen in chaos runs)
             KafkaError._UNKNOWN_PARTITION}  # the client's metadata, refreshed mid-election, lacks a listed partition
                                             # for a moment (a watermark query of the Ray loop's test, nodes killed)


# a commit from a member the group no longer knows: the coordinator restarted or moved (a broker died) or the
# session lapsed; the client rejoins on its next poll, and whatever the commit named is committed later
MEMBERSHIP_LOST = {KafkaError.UNKNOWN_MEMBER_ID, KafkaError.ILLEGAL_GENERATION, KafkaError.REBALANCE_IN_PROGRESS}


def commit_refused(exc: KafkaException) -> bool:
    """A commit that failed for a moment or because the group forgot this member, not for a lasting cause."""
    error = exc.args[0] if exc.args else None
    return transient(exc) or (isinstance(error, KafkaError) and error.code() in MEMBERSHIP_LOST)


def transient(exc: KafkaException) -> bool:
    """What a leader election, a moving group coordinator or a just-created topic answers for a moment."""
    error = exc.args[0] if exc.args else None
    return isinstance(error, KafkaError) and (error.retriable() or error.code() in TRANSIENT)


def retry_transient(call: Callable[[], T], deadline: float, pause_s: float = 0.2) -> T:
    """`call()`, again after a transient error until the (monotonic) deadline; other errors at once."""
    while True:
        try:
            return call()
        except KafkaException as exc:
            if not transient(exc) or time.monotonic() > deadline:
                raise
            time.sleep(pause_s)

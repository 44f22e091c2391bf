"""Which Kafka errors are retried: the moments of a leader election or a broker dying, not real failures."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException

from seamlessflow.kafka.errors import retry_transient, transient


def fails_then(value, errors):
    pending = list(errors)

    def call():
        if pending:
            raise KafkaException(KafkaError(pending.pop(0)))
        return value
    return call


def test_a_request_to_a_broker_that_just_died_is_retried():
    # a watermark query in flight when its broker died stopped a trainer's start in a chaos run
    assert transient(KafkaException(KafkaError(KafkaError._DESTROY_BROKER)))
    call = fails_then((0, 5), [KafkaError._DESTROY_BROKER, KafkaError.NOT_LEADER_FOR_PARTITION])
    assert retry_transient(call, time.monotonic() + 5, pause_s=0.01) == (0, 5)


def test_a_partition_the_clients_metadata_lacks_for_a_moment_is_retried():
    # listed a moment before, then missing from a metadata refresh while nodes were killed (CI, the Ray loop)
    call = fails_then((0, 7), [KafkaError._UNKNOWN_PARTITION, KafkaError._UNKNOWN_PARTITION])
    assert retry_transient(call, time.monotonic() + 5, pause_s=0.01) == (0, 7)


def test_a_real_failure_is_raised_at_once():
    call = fails_then(None, [KafkaError.TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(KafkaException):
        retry_transient(call, time.monotonic() + 5, pause_s=0.01)

"""The cluster as `status` sees it: a broker that is up is found, an address nothing listens at is no wait."""

import time

from seamlessflow.config import Settings
from seamlessflow.kafka.admin import brokers
from seamlessflow.ports import free_port


def test_a_running_broker_is_listed_with_its_controller(broker):
    listed = brokers(broker.client_settings, timeout_s=10.0)
    assert len(listed) == 1 and listed[0]["controller"]


def test_an_address_nothing_listens_at_answers_at_once_whatever_the_budget():
    started = time.monotonic()
    assert brokers(Settings(bootstrap_servers=f"127.0.0.1:{free_port()}"), timeout_s=30.0) == []
    assert time.monotonic() - started < 5  # the budget is for a broker that listens and is slow to answer

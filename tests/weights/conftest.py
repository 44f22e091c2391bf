"""A second simulated host (`seamlessflow.testing.second_host`) for the weights tests that run a worker there."""

from __future__ import annotations

import os

import pytest

from seamlessflow.testing.second_host import NamespaceUnavailable, SecondHost


@pytest.fixture
def second_host():
    if os.geteuid() != 0:
        pytest.skip("a network namespace needs root")
    try:
        host = SecondHost.create()
    except NamespaceUnavailable as exc:
        pytest.skip(f"no network namespace on this machine: {exc}")
    yield host
    host.destroy()

"""The xdist groups in tests/conftest.py must reach the scheduler, or a file's tests that share a
module-scoped service are split across workers and fail far from the cause."""

import pytest


def test_grouping_reaches_the_xdist_scheduler(request):
    if not getattr(request.config.option, "loadgroup", False):
        pytest.skip("not under pytest-xdist --dist loadgroup")
    assert request.node.nodeid.endswith("@tests/test_xdist_groups.py"), (
        "xdist_group marks were dropped (pytest-xdist #1386 with pytest 9.2: keep pytest below 9.2)")

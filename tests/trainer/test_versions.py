"""Which URI the trainer announces for a version, and when it serves its versions over HTTP."""

from __future__ import annotations

import pytest

from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.versions import version_uri, weights_server


@pytest.mark.parametrize(
    "fields, serves",
    [
        ({}, False),  # one machine: engines read the files
        ({"transfer_host": "10.0.0.5"}, True),  # reached at another address: engines may be elsewhere
        ({"weights_host": "trainer-0.cluster.local"}, True),
        ({"weights_host": "localhost", "transfer_host": "10.0.0.5"}, False),  # weights_host decides
        ({"weights_host": "::1"}, False),
        ({"serve_weights": "always"}, True),
        ({"serve_weights": "never", "weights_host": "10.0.0.5"}, False),
    ],
)
def test_auto_serves_when_the_trainer_is_reached_at_a_non_loopback_address(fields, serves):
    assert TrainerOptions(**fields).serves_weights() is serves


def test_a_served_version_is_announced_as_http_else_as_file_and_without_files_as_nothing(tmp_path):
    root = tmp_path / "weights"
    (root / "v000002").mkdir(parents=True)
    assert weights_server(TrainerOptions(), root) is None
    assert version_uri(root / "v000002", None) == (root / "v000002").as_uri()
    server = weights_server(TrainerOptions(serve_weights="always", weights_port=0), root)
    assert server is not None
    try:
        assert version_uri(root / "v000002", server) == f"http://127.0.0.1:{server.port}/v000002/"
        assert version_uri(root / "v000003", server) == ""  # transfer only: no files
    finally:
        server.stop()

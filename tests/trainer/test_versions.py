"""Which URI the trainer announces for a version, and when it serves its versions over HTTP."""

from __future__ import annotations

import pytest

from seamlessflow.config import Settings
from seamlessflow.ports import NODE_ADDRESS_ENV
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


def test_under_a_placement_that_spreads_the_stack_a_loopback_trainer_serves_at_its_nodes_address(monkeypatch):
    monkeypatch.setenv(NODE_ADDRESS_ENV, "10.0.0.7")  # what Ray's service host tells every service
    assert TrainerOptions().advertised_weights_host() == "10.0.0.7" and TrainerOptions().serves_weights()
    assert TrainerOptions(weights_host="trainer-0.cluster.local").advertised_weights_host() == "trainer-0.cluster.local"
    assert not TrainerOptions(serve_weights="never").serves_weights()


def test_without_a_model_path_the_trainer_trains_what_the_engines_serve_from_its_own_data_dir(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert TrainerOptions().with_model(settings).model_path == str(tmp_path.resolve() / "models" / "tiny")
    assert TrainerOptions().with_model(settings.with_overrides(rollout={"model": "/m/base"})).model_path == "/m/base"
    assert TrainerOptions(model_path="/m/mine").with_model(settings).model_path == "/m/mine"
    hub = settings.with_overrides(rollout={"model": "Qwen/Qwen2.5-7B"})
    assert TrainerOptions().with_model(hub).model_path == "Qwen/Qwen2.5-7B"  # not a path under the cwd


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

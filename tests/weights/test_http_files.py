"""Version directories served from the trainer's host and fetched by a worker with no shared file system."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from seamlessflow.weights.http_files import WeightsServer, fetch_version, local_weights, prune_copies


@pytest.fixture
def served(tmp_path):
    version = tmp_path / "trainer" / "v000002"
    version.mkdir(parents=True)
    (version / "config.json").write_text('{"model_type": "qwen2"}')
    (version / "model.safetensors").write_bytes(bytes(range(256)) * 5000)
    server = WeightsServer(tmp_path / "trainer", host="127.0.0.1").start()
    yield server, version
    server.stop()


def test_a_worker_fetches_a_version_byte_for_byte_into_its_own_cache(served, tmp_path):
    server, version = served
    (server.root / ".weights-server").write_text("another server")  # as a worker on another host sees it
    uri = server.uri_for(version)
    local = local_weights(uri, cache=tmp_path / "worker-cache")
    assert local.parent == tmp_path / "worker-cache" and local.name == "v000002"
    for name in ("config.json", "model.safetensors"):
        assert (local / name).read_bytes() == (version / name).read_bytes()
    assert not list((tmp_path / "worker-cache").glob("*.part"))


def test_a_fetched_version_is_not_fetched_again(served, tmp_path):
    server, version = served
    first = fetch_version(server.uri_for(version), tmp_path / "cache")
    server.stop()
    assert fetch_version(server.uri_for(version), tmp_path / "cache") == first


def test_a_missing_version_fails_and_leaves_no_partial_directory(served, tmp_path):
    server, version = served
    with pytest.raises(httpx.HTTPStatusError):
        fetch_version(server.uri_for(version).replace("v000002", "v000009"), tmp_path / "cache")
    assert not (tmp_path / "cache" / "v000009").exists()


def test_http_uris_need_a_cache_and_other_schemes_are_refused(tmp_path):
    with pytest.raises(ValueError):
        local_weights("http://host:1/v000002/")
    with pytest.raises(ValueError):
        local_weights("s3://bucket/v000002", cache=tmp_path)


def test_file_uris_and_paths_are_local_as_they_are(tmp_path):
    assert local_weights((tmp_path / "v 2").as_uri()) == tmp_path / "v 2"
    assert local_weights("/a/b") == Path("/a/b")
    with pytest.raises(ValueError):
        local_weights("http://host/v2")


def test_a_worker_that_sees_the_trainers_directory_loads_it_in_place(served, tmp_path):
    server, version = served
    assert local_weights(server.uri_for(version), cache=tmp_path / "worker-cache") == version.resolve()
    assert not (tmp_path / "worker-cache").exists()  # nothing copied


def test_a_directory_of_the_same_path_without_the_servers_token_is_not_trusted(served, tmp_path):
    """What another host sees at the trainer's path (a stale copy, another run's) holds another token."""
    server, version = served
    (server.root / ".weights-server").write_text("another server")
    local = local_weights(server.uri_for(version), cache=tmp_path / "worker-cache")
    assert local == tmp_path / "worker-cache" / "v000002"
    assert (local / "model.safetensors").read_bytes() == (version / "model.safetensors").read_bytes()


def test_the_listing_names_files_only_not_the_servers_token(served):
    server, version = served
    (server.root / "v000002" / ".weights-server").write_text("x")  # even inside a version directory
    assert httpx.get(server.uri_for(version)).json() == ["config.json", "model.safetensors"]


def test_a_copy_fetched_before_is_used_while_the_server_is_away(served, tmp_path):
    server, version = served
    (server.root / ".weights-server").write_text("another server")
    first = local_weights(server.uri_for(version), cache=tmp_path / "cache")
    server.stop()
    assert local_weights(server.uri_for(version), cache=tmp_path / "cache") == first
    with pytest.raises(httpx.HTTPError):
        local_weights(server.uri_for(version).replace("v000002", "v000003"), cache=tmp_path / "cache")


def test_only_the_newest_copies_stay_on_a_workers_disk(tmp_path):
    for version in (1, 2, 3, 4):
        (tmp_path / f"v00000{version}").mkdir()
    (tmp_path / "v000005.part").mkdir()  # being fetched: not a copy
    prune_copies(tmp_path, keep=2, protect=tmp_path / "v000001")  # the engine still holds v1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v000001", "v000003", "v000004", "v000005.part"]

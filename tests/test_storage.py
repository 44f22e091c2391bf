"""Checkpoint tags in an S3-compatible store (moto's server) and in a plain path, through one interface."""

from __future__ import annotations

import pytest

from seamlessflow.storage import CheckpointStore
from seamlessflow.testing.object_store import object_store


@pytest.fixture(scope="module")
def s3_uri():
    with object_store() as store:
        yield store.make_bucket("checkpoints") + "/run-a", store.storage_options()


def checkpoint(directory, tag, ranks=2):
    (directory / tag / "global_step1").mkdir(parents=True)
    for rank in range(ranks):
        (directory / tag / f"zero_pp_rank_{rank}_mp_rank_00_optim_states.pt").write_bytes(bytes([rank]) * 1000)
    (directory / tag / "global_step1" / "mp_rank_00_model_states.pt").write_bytes(b"model" * 100)
    (directory / "latest").write_text(tag)


@pytest.fixture(params=["s3", "path"])
def store(request, s3_uri, tmp_path):
    if request.param == "s3":
        uri, options = s3_uri
        return CheckpointStore(f"{uri}-{tmp_path.name}", options)
    return CheckpointStore(str(tmp_path / "shared"))


def test_a_node_without_the_checkpoint_downloads_the_newest_tag_byte_for_byte(store, tmp_path):
    node_a, node_b = tmp_path / "a", tmp_path / "b"
    assert store.latest() is None and store.download_latest(node_b) is None
    for tag in ("step00000001", "step00000002"):
        checkpoint(node_a, tag)
        store.upload_tag(node_a, tag)
        store.mark_latest(tag)
    assert store.download_latest(node_b) == "step00000002"
    assert (node_b / "latest").read_text() == "step00000002"
    files = sorted(p.relative_to(node_a / "step00000002") for p in (node_a / "step00000002").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(node_b / "step00000002") for p in (node_b / "step00000002").rglob("*")
                           if p.is_file())
    for name in files:
        assert (node_b / "step00000002" / name).read_bytes() == (node_a / "step00000002" / name).read_bytes()
    assert store.download_latest(node_b) is None  # held already: nothing downloaded again


def test_a_tag_counts_only_once_marked_latest(store, tmp_path):
    checkpoint(tmp_path / "a", "step00000001")
    store.upload_tag(tmp_path / "a", "step00000001")  # uploaded, not yet marked (another node still uploading)
    assert store.download_latest(tmp_path / "b") is None


def test_pruning_keeps_the_newest_tags_and_loose_files(store, tmp_path):
    for step in (1, 2, 3):
        checkpoint(tmp_path / "a", f"step0000000{step}")
        store.upload_tag(tmp_path / "a", f"step0000000{step}")
    store.mark_latest("step00000003")
    (tmp_path / "steps.jsonl").write_text('{"step": 3}\n')
    store.upload_file(tmp_path / "steps.jsonl", "steps.jsonl")
    store.prune(keep=2)
    assert sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in store.fs.ls(store.root, detail=False)) == [
        "latest", "step00000002", "step00000003", "steps.jsonl"]
    assert store.download_file("steps.jsonl", tmp_path / "back.jsonl")
    assert (tmp_path / "back.jsonl").read_text() == '{"step": 3}\n'
    assert not store.download_file("nothing.jsonl", tmp_path / "nothing.jsonl")


def test_each_object_store_starts_empty_though_moto_keeps_its_state_per_process():
    with object_store() as first:
        first.make_bucket("same-name")
    with object_store() as second:
        assert second.make_bucket("same-name") == "s3://same-name"

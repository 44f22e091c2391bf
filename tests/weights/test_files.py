"""Version directories (the newest complete one, pruning) and the background weight writer: one write in
flight, versions handed back in order, and a failed write surfacing on the loop's thread."""

import threading
from pathlib import Path

import pytest

from seamlessflow.weights.files import WeightWriter, latest_version, prune_versions, version_dir, version_of


def test_a_new_version_waits_for_the_previous_write_and_versions_come_back_in_order(tmp_path):
    writer = WeightWriter()
    release = threading.Event()

    def slow_write() -> Path:
        release.wait(5)
        return tmp_path / "v1"

    assert writer.submit(1, 10, slow_write) < 0.5  # nothing in flight: no wait
    assert writer.written() == []  # v1 still being written: nothing to announce
    threading.Timer(0.3, release.set).start()
    waited = writer.submit(2, 20, lambda: tmp_path / "v2")
    assert waited >= 0.2  # bounded: v2's snapshot waited for v1's write rather than queueing behind it
    assert [(p.version, p.step) for p in writer.drain()] == [(1, 10), (2, 20)]
    writer.close()


def test_a_failed_write_raises_where_the_loop_collects_it():
    writer = WeightWriter()

    def broken() -> Path:
        raise OSError("disk full")

    writer.submit(1, 1, broken)
    with pytest.raises(OSError, match="disk full"):
        writer.drain()
    writer.close()


def test_prune_keeps_newest_versions(tmp_path):
    for v in (1, 2, 3, 4):
        version_dir(tmp_path, v).mkdir()
    prune_versions(tmp_path, keep=2, protect=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v000003", "v000004"]


def test_latest_version_is_the_newest_complete_directory(tmp_path):
    assert latest_version(tmp_path / "none") == 0
    for v in (2, 11):
        version_dir(tmp_path, v).mkdir()
    (tmp_path / "v000012.tmp").mkdir()  # a save cut short: not a version
    assert latest_version(tmp_path) == 11


def test_a_trainer_process_writes_its_versions_beside_anothers_never_over_them(tmp_path):
    """A fenced trainer finishing a write names it after itself; the newest version and pruning see both."""
    assert version_dir(tmp_path, 3, "ab12cd").name == "v000003-ab12cd"
    for v, incarnation in ((2, ""), (3, "ab12cd"), (3, "zz99zz"), (4, "ab12cd")):
        version_dir(tmp_path, v, incarnation).mkdir()
    (tmp_path / "v000005-ab12cd.tmp").mkdir()  # a write cut short
    assert latest_version(tmp_path) == 4
    names = ("v000004-ab12cd", "v000005-ab12cd.tmp", "v00004", "w000004")
    assert [version_of(n) for n in names] == [4, None, None, None]
    prune_versions(tmp_path, keep=1, protect=3, incarnation="ab12cd")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["v000003-ab12cd", "v000004-ab12cd", "v000005-ab12cd.tmp"]

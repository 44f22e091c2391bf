"""Which checkpoint a restart loads: tags of their own per trainer process, `latest` named only after the
commit (by the loop), and pruning that keeps the named one and the ones before it, never a fenced trainer's."""

from seamlessflow.trainer.checkpoints import name_latest, prune_tags, tag


def test_tags_sort_by_step_and_differ_per_process():
    assert tag(12, "ab12cd") == "step00000012-ab12cd"
    assert sorted([tag(10, "zz"), tag(9, "aa"), tag(12, "aa")]) == [tag(9, "aa"), tag(10, "zz"), tag(12, "aa")]


def test_latest_names_the_tag_and_nothing_is_left_beside_it(tmp_path):
    name_latest(tmp_path, tag(2, "aa"))
    name_latest(tmp_path, tag(4, "aa"))
    assert (tmp_path / "latest").read_text() == "step00000004-aa"
    assert [p.name for p in tmp_path.iterdir()] == ["latest"]


def test_prune_keeps_the_named_tag_and_those_before_it_and_drops_an_uncommitted_newer_one(tmp_path):
    for name in (tag(2, "old"), tag(4, "old"), tag(6, "new"), tag(8, "zombie"), tag(5, "new") + ".download"):
        (tmp_path / name).mkdir()
    prune_tags(tmp_path, tag(6, "new"), keep=2)
    assert sorted(p.name for p in tmp_path.iterdir()) == [tag(4, "old"), tag(5, "new") + ".download", tag(6, "new")]

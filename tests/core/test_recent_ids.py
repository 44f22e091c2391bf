from hypothesis import given
from hypothesis import strategies as st

from seamlessflow.core.recent_ids import RecentIds


def test_the_oldest_id_falls_out_and_adding_again_makes_an_id_newest():
    ids = RecentIds(3, ["a", "b", "c"])
    ids.add("a")  # now b is the oldest
    ids.add("d")
    assert list(ids) == ["c", "a", "d"] and "b" not in ids and len(ids) == 3


def test_discard_forgets_one_id_and_ignores_an_unknown_one():
    ids = RecentIds(2, ["a", "b"])
    ids.discard("a")
    ids.discard("zzz")
    assert list(ids) == ["b"]


@given(st.lists(st.sampled_from("abcdefghij"), max_size=60), st.integers(1, 5))
def test_it_holds_exactly_the_newest_distinct_ids(added, capacity):
    ids = RecentIds(capacity)
    for id_ in added:
        ids.add(id_)
    newest_first = list(dict.fromkeys(reversed(added)))
    assert list(ids) == list(reversed(newest_first[:capacity]))

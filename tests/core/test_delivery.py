"""The announce-after-delivery rule and whom the trainer joins or catches up, on small hand-made engines."""

from seamlessflow.core.delivery import EngineSeen, awaited, behind, may_announce, stale, to_join


def engine(name, version, up=True, serving=True, transfer=True, pid=1):
    return EngineSeen(name, f"http://{name}", version, up, serving, transfer, pid)


def test_a_version_waits_for_every_serving_transfer_engine_that_lacks_it():
    engines = [engine("a", 2), engine("b", 1), engine("c", 1)]
    assert [e.resource_id for e in awaited(2, engines, holding=set(), routed_out=set())] == ["b", "c"]
    assert not may_announce(2, engines, holding={"http://b"}, routed_out=set())
    assert may_announce(2, engines, holding={"http://b", "http://c"}, routed_out=set())


def test_a_failed_engine_taken_out_of_routing_no_longer_holds_the_announcement():
    engines = [engine("a", 1), engine("b", 1)]
    assert may_announce(2, engines, holding={"http://a"}, routed_out={"http://b"})


def test_engines_not_serving_or_fed_from_files_do_not_hold_it():
    engines = [engine("idle", 0, serving=False), engine("files", 0, transfer=False),
               engine("catching-up", 0, up=True, serving=False)]
    assert may_announce(3, engines, holding=set(), routed_out=set())


def test_join_the_transfer_engines_that_are_up_and_catch_up_the_joined_ones_behind():
    engines = [engine("a", 2), engine("b", 0, serving=False), engine("down", 0, up=False),
               engine("files", 0, transfer=False)]
    assert [e.resource_id for e in to_join(engines, joined={"http://a"})] == ["b"]
    assert [e.resource_id for e in behind(engines, 2, joined={"http://a", "http://b"})] == ["b"]
    assert behind(engines, 2, joined={"http://a"}) == []


def test_a_restarted_or_fallen_engine_leaves_its_group_so_it_is_joined_again():
    engines = [engine("a", 2, pid=7), engine("b", 0, pid=9), engine("c", 2, up=False)]
    assert stale(engines, {"http://a": 7, "http://b": 8, "http://c": 3, "http://gone": 1}) == ["http://b", "http://c"]

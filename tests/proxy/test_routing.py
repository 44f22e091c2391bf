"""Rendezvous routing: sticky sessions, only a dead engine's sessions move, versions only go up."""

from seamlessflow.proxy.routing import EngineTable


def table(*ids):
    engines = EngineTable(health_failures=2)
    for engine_id in ids:
        engines.add(engine_id, f"http://{engine_id}:8000/v1")
    return engines


def test_a_session_sticks_and_sessions_spread():
    engines = table("a", "b", "c")
    picks = {s: engines.pick(s).id for s in (f"s{i}" for i in range(60))}
    assert picks == {s: engines.pick(s).id for s in picks}
    assert set(picks.values()) == {"a", "b", "c"}


def test_only_the_failed_engines_sessions_move_and_come_back():
    engines = table("a", "b", "c")
    before = {s: engines.pick(s).id for s in (f"s{i}" for i in range(60))}
    down = next(e for e in engines if e.id == "b")
    engines.mark_down(down)
    during = {s: engines.pick(s).id for s in before}
    assert all(during[s] == before[s] for s in before if before[s] != "b")
    assert "b" not in during.values()
    engines.health_result(down, ok=True)
    assert {s: engines.pick(s).id for s in before} == before


def test_health_failures_take_an_engine_out_after_the_threshold():
    engines = table("a")
    [engine] = list(engines)
    engines.health_result(engine, ok=False)
    assert engines.pick("s") is engine
    engines.health_result(engine, ok=False)
    assert engines.pick("s") is None


def test_announced_engines_follow_their_state_and_versions_never_go_down():
    engines = table()
    engines.announce("r0", "http://r0:8000", active=True, version=3)
    assert engines.pick("s").version == 3
    engines.announce("r0", "http://r0:8000/", active=True, version=2)
    assert engines.pick("s").version == 3 and len(engines) == 1
    engines.announce("r0", "http://r0:8000", active=False, version=4)
    assert engines.pick("s") is None


def test_profiles_pick_fitting_engines_and_heartbeats_update_their_tags():
    engines = EngineTable(health_failures=1)
    engines.add("c", "http://c:8000", hardware_tags=frozenset({"compute"}))
    engines.announce("b", "http://b:8000", active=True, version=0, hardware_tags=frozenset({"bandwidth"}))
    assert {engines.pick(f"s{i}", profile="decode").id for i in range(20)} == {"b"}
    assert {engines.pick(f"s{i}", profile="prefill").id for i in range(20)} == {"c"}
    engines.announce("b", "http://b:8000", active=True, version=0, hardware_tags=frozenset({"compute"}))
    assert {engines.pick(f"s{i}", profile="decode").id for i in range(20)} == {"b", "c"}  # no fit left: any

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


def test_a_held_engine_is_not_routed_and_its_release_sets_its_version_exactly():
    engines = table()
    engines.announce("r0", "http://r0:8000", active=True, version=3)
    held = engines.hold("http://r0:8000/v1")
    assert held is not None and held.held_at == 3 and engines.any_held
    assert engines.pick("s") is None
    engines.announce("r0", "http://r0:8000", active=True, version=3)  # a heartbeat during the update
    engines.set_all_versions(5)  # a resume command's label: says nothing of this engine's update
    assert engines.pick("s") is None
    engines.release("http://r0:8000", 2)  # exact, even lower (an engine restarted on an older version)
    assert engines.pick("s").version == 2 and not engines.any_held
    assert engines.hold("http://unknown:1") is None and engines.release("http://unknown:1", 1) is None


def test_a_heartbeat_with_a_newer_version_ends_a_hold_left_by_a_failed_update():
    engines = table()
    engines.announce("r0", "http://r0:8000", active=True, version=3)
    engines.hold("http://r0:8000")
    engines.announce("r0", "http://r0:8000", active=True, version=4)  # its worker loaded version 4 from files
    assert engines.pick("s").version == 4


def test_an_engine_held_before_its_first_heartbeat_takes_its_resource_id_from_it():
    """Found on a live stack: an engine a scale-up added was held (its first version load) before its first
    heartbeat reached the proxy, so the fence knew it by its URL, and every token it generated was recorded with
    the URL as its engine id. Its heartbeat names it; a configured engine keeps the id its config gives."""
    engines = table()
    placeholder = engines.add("http://r1:8000", "http://r1:8000", source="status")  # as EngineFence.hold adds it
    engines.announce("rollout-1", "http://r1:8000", active=True, version=0)
    assert placeholder.id == "rollout-1" and len(engines) == 1
    configured = engines.add("e0", "http://e0:8000")
    engines.announce("rollout-0", "http://e0:8000", active=True, version=0)
    assert configured.id == "e0"

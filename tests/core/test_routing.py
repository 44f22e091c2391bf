"""Hardware-aware routing: profile -> fitting engines, sticky hashing inside them, failover, learnt profiles."""

from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from seamlessflow.core.routing import FitTable, Profile, ProfileLearner, parse_profile, route

P, D = Profile.PREFILL, Profile.DECODE


@dataclass(frozen=True)
class Eng:
    id: str
    hardware_tags: frozenset[str] = frozenset()


def eng(engine_id, *tags):
    return Eng(engine_id, frozenset(tags))


CLUSTER = [eng("c0", "compute", "h100"), eng("c1", "compute", "h100"), eng("b0", "bandwidth", "h20"),
           eng("b1", "bandwidth", "h20")]
SESSIONS = [f"s{i}" for i in range(40)]


def test_sessions_land_on_engines_whose_tags_fit_their_profile_and_spread_there():
    prefill = {route(s, P, CLUSTER).id for s in SESSIONS}
    decode = {route(s, D, CLUSTER).id for s in SESSIONS}
    assert prefill == {"c0", "c1"} and decode == {"b0", "b1"}


def test_unknown_profile_may_go_anywhere_and_untagged_clusters_route_as_before():
    assert {route(s, None, CLUSTER).id for s in SESSIONS} == {"c0", "c1", "b0", "b1"}
    plain = [eng("a"), eng("b")]
    assert [route(s, P, plain) for s in SESSIONS] == [route(s, None, plain) for s in SESSIONS]


def test_a_session_moves_only_when_its_engine_leaves_and_falls_back_only_when_no_fitting_engine_is_left():
    before = {s: route(s, D, CLUSTER).id for s in SESSIONS}
    without_b0 = [e for e in CLUSTER if e.id != "b0"]
    during = {s: route(s, D, without_b0).id for s in SESSIONS}
    assert all(during[s] == before[s] for s in SESSIONS if before[s] == "b1")
    assert set(during.values()) == {"b1"}  # b0's sessions went to the other fitting engine, not to compute
    no_bandwidth = [e for e in CLUSTER if "bandwidth" not in e.hardware_tags]
    assert {route(s, D, no_bandwidth).id for s in SESSIONS} == {"c0", "c1"}  # failover to any healthy engine
    assert {s: route(s, D, CLUSTER).id for s in SESSIONS} == before  # and back once they recover
    assert route("s0", D, []) is None


def test_fit_table_from_config_and_gpu_model_tags():
    table = FitTable.from_mapping({"prefill": ["h100"], "decode": ["h20", "l40s"]})
    assert {route(s, P, CLUSTER, table).id for s in SESSIONS} == {"c0", "c1"}
    assert table.fits(D, {"l40s"}) and not table.fits(D, {"compute"})
    with pytest.raises(ValueError, match="not a profile"):
        FitTable.from_mapping({"auto": ["x"]})


def test_parse_profile():
    assert parse_profile("Prefill") is P and parse_profile(" decode ") is D
    assert parse_profile(None) is None and parse_profile("auto") is None
    with pytest.raises(ValueError, match="unknown session profile"):
        parse_profile("fast")


@settings(max_examples=60, deadline=None)
@given(
    tags=st.lists(
        st.sampled_from([(), ("compute",), ("bandwidth",), ("compute", "bandwidth")]), min_size=1, max_size=6
    ),
    healthy=st.lists(st.booleans(), min_size=6, max_size=6),
    profile=st.sampled_from([P, D, None]),
    session=st.text(min_size=1, max_size=8),
)
def test_routing_properties(tags, healthy, profile, session):
    engines = [eng(f"e{i}", *t) for i, t in enumerate(tags)]
    up = [e for e, ok in zip(engines, healthy, strict=False) if ok]
    chosen = route(session, profile, up)
    if not up:
        assert chosen is None
        return
    table = FitTable()
    fitting_up = [e for e in up if table.fits(profile, e.hardware_tags)]
    assert chosen in (fitting_up or up)  # fits when anything fitting is healthy; else any healthy engine
    assert route(session, profile, list(reversed(up))) is chosen  # order of candidates does not matter
    others = [e for e in up if e is not chosen]
    if others:  # removing an engine the session is not on never moves it
        assert route(session, profile, [e for e in up if e is not others[0]]) is chosen


def test_learner_decides_after_min_tokens_by_fed_vs_generated():
    learner = ProfileLearner(min_tokens=100)
    assert learner.observe(40, 10) is None  # 50 tokens: too few to tell
    assert learner.observe(250, 5) is P  # fed 40 + (250 - 50) = 240 >= 4 x 15
    decode = ProfileLearner(min_tokens=100)
    assert decode.observe(20, 200) is D


def test_learner_counts_only_new_prompt_tokens_of_a_multi_turn_session():
    learner = ProfileLearner(min_tokens=1)
    learner.observe(100, 50)  # fed 100
    learner.observe(160, 50)  # the previous context was 150 tokens: fed 10 more
    assert (learner.fed, learner.generated) == (110, 100)
    assert learner.profile is D


def test_learner_flips_only_past_the_hysteresis_band():
    learner = ProfileLearner(ratio=4, min_tokens=1, hysteresis=2)
    learner.observe(800, 100)  # fed 800 vs 100 generated: prefill
    assert learner.profile is P
    learner.observe(900, 200)  # cumulative 800 / 300 = 2.7: below 4, above 4/2: stays
    assert learner.profile is P
    learner.observe(1100, 200)  # 800 / 500 = 1.6 < 2: flips
    assert learner.profile is D
    learner.observe(5000, 1)  # (800 + 3700) / 501 = 9.0 >= 8: flips back
    assert learner.profile is P

"""Session ownership and counters are bounded by an LRU that never evicts a session with calls in flight."""

import pytest

from seamlessflow.core.routing import Profile, ProfileLearner
from seamlessflow.proxy.sessions import SessionOwnedByOtherTeam, SessionTable


def test_a_session_belongs_to_the_team_that_opened_it():
    sessions = SessionTable(10)
    sessions.claim("s", "alpha")
    with pytest.raises(SessionOwnedByOtherTeam):
        sessions.claim("s", "beta")


def test_least_recently_used_idle_sessions_are_evicted_first():
    sessions = SessionTable(2)
    busy = sessions.claim("busy", "t")
    busy.call_started()
    sessions.claim("idle", "t")
    sessions.claim("new", "t")
    assert sessions.get("busy") is busy and sessions.get("idle") is None and len(sessions) == 2
    busy.call_finished()
    assert busy.idle.is_set()


def test_a_declared_profile_wins_over_the_learnt_one_and_learning_can_be_off():
    sessions = SessionTable(10, learner=lambda: ProfileLearner(min_tokens=10))
    state = sessions.claim("s", "t")
    state.observe(prompt_tokens=5, completion_tokens=100)
    assert state.profile is Profile.DECODE
    state.declared = Profile.PREFILL
    assert state.profile is Profile.PREFILL
    unlearnt = SessionTable(10).claim("u", "t")
    unlearnt.observe(prompt_tokens=5, completion_tokens=100)
    assert unlearnt.profile is None

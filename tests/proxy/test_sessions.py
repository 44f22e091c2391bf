"""Session ownership and counters are bounded by an LRU that never evicts a session with calls in flight."""

import pytest

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

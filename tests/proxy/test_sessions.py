"""Session ownership and counters are bounded by an LRU that never evicts a session with calls in flight."""

import asyncio

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
    assert busy.inflight == 0


async def test_an_end_waits_for_the_calls_in_flight_and_not_when_there_are_none():
    state = SessionTable(2).claim("s", "t")
    await asyncio.wait_for(state.idle(), 1)  # nothing in flight: no wait
    state.call_started()
    state.call_started()
    waiting = asyncio.create_task(state.idle())
    await asyncio.sleep(0.01)
    state.call_finished()
    await asyncio.sleep(0.01)
    assert not waiting.done()
    state.call_finished()
    await asyncio.wait_for(waiting, 1)
    state.call_started()  # a new call after the wait: the next end waits again
    again = asyncio.create_task(state.idle())
    await asyncio.sleep(0.01)
    assert not again.done()
    state.call_finished()
    await asyncio.wait_for(again, 1)


def test_a_session_state_stays_small():
    """100 000 of them are held: no per-state event or attribute dict (was ~1.3 KiB, ~0.4 KiB now)."""
    state = SessionTable(2).claim("s", "t")
    assert not hasattr(state, "__dict__") and state._idle is None


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

from seamlessflow.replay.select import Filter, select_sessions, select_trajectories
from seamlessflow.testing.replay_samples import expected_two_turn, forked_session, records, two_turn_session


def test_sessions_filtered_by_name_team_reward_and_status(codec):
    recs = records(two_turn_session("s1") + two_turn_session("s2", team="blue") + forked_session("f1")
                   + two_turn_session("s3")[:2], codec)  # s3 has no end: open

    def ids(where):
        return [s.session_id for s in select_sessions(recs, where)]

    assert ids(Filter()) == ["s1", "s2", "f1", "s3"]
    assert ids(Filter(sessions=frozenset({"f1"}))) == ["f1"]
    assert ids(Filter(team="blue")) == ["s2"]
    assert ids(Filter(min_reward=0.9)) == ["s1", "s2"]
    assert ids(Filter(max_reward=0.6)) == ["f1"]
    assert ids(Filter(statuses=frozenset({"open"}))) == ["s3"]


def test_time_window_on_record_timestamps(codec):
    recs = records(two_turn_session("s1") + two_turn_session("s2"), codec, start_ms=1000)  # s2 from 1003
    assert [s.session_id for s in select_sessions(recs, Filter(since_ms=1003))] == ["s2"]
    assert [s.session_id for s in select_sessions(recs, Filter(until_ms=1003))] == ["s1"]


def test_a_window_that_cuts_a_session_marks_it_incomplete(codec):
    recs = records(two_turn_session("s1"), codec, start_ms=1000)
    (cut,) = select_sessions(recs, Filter(since_ms=1001))
    assert not cut.complete
    (whole,) = select_sessions(recs, Filter())
    assert whole.complete


def test_trajectories_filtered(codec):
    recs = records([expected_two_turn("s1"), expected_two_turn("s2", team="blue", reward=0.0)], codec,
                   topic="t.trajectories")
    assert [r.message.session_id for r in select_trajectories(recs, Filter(team="blue"))] == ["s2"]
    assert [r.message.session_id for r in select_trajectories(recs, Filter(min_reward=0.5))] == ["s1"]

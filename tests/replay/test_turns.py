from seamlessflow.replay.select import group_sessions
from seamlessflow.replay.turns import segments, session_json, session_turns, trajectory_json
from seamlessflow.testing.replay_samples import expected_two_turn, forked_session, records, two_turn_session


def test_turns_show_known_fed_and_generated_tokens(codec):
    (session,) = group_sessions(records(two_turn_session(), codec))
    first, second = session_turns(session)
    assert (first.outcome, first.known, first.fed, first.generated) == ("start", 0, [1, 2], [3, 4])
    assert (second.outcome, second.known, second.fed, second.generated) == ("extension", 4, [5], [6])
    assert second.versions == [2]


def test_a_rewritten_history_shows_as_a_fork(codec):
    (session,) = group_sessions(records(forked_session(), codec))
    second = session_turns(session)[1]
    assert (second.outcome, second.known, second.fed) == ("fork", 2, [7])


def test_trajectory_segments_alternate_fed_and_generated():
    parts = segments(expected_two_turn())
    assert [(p.kind, p.start, p.tokens) for p in parts] == [
        ("fed", 0, [1, 2]), ("generated", 2, [3, 4]), ("fed", 4, [5]), ("generated", 5, [6])]
    assert parts[3].versions == [2] and parts[1].logprobs == [-0.5, -0.5]


def test_json_forms_carry_the_boundaries(codec):
    (session,) = group_sessions(records(two_turn_session(), codec))
    data = session_json(session)
    assert data["status"] == "done" and [t["fed"] for t in data["turns"]] == [[1, 2], [5]]
    assert [s["kind"] for s in trajectory_json(expected_two_turn())["segments"]] == ["fed", "generated"] * 2

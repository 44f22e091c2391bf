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


def test_per_turn_rewards_show_on_the_session_and_the_trajectory(codec):
    """A reward by position (#1) and one by call id reach their turns in the session view; the trajectory's
    turn rewards are in its title."""
    from dataclasses import replace

    from rich.console import Console

    from seamlessflow.replay.render import session_panel, trajectory_panel

    *calls, end = two_turn_session()
    end = replace(end, call_rewards={"s1c1": 0.25, "#1": -0.5})
    (session,) = group_sessions(records([*calls, end], codec))
    assert [t.reward for t in session_turns(session)] == [0.25, -0.5]
    assert session_json(session)["call_rewards"] == {"s1c1": 0.25, "#1": -0.5}
    console = Console(width=200, record=True)
    console.print(session_panel(session))
    console.print(trajectory_panel(replace(expected_two_turn(), turn_rewards=[0.25, -0.5])))
    shown = console.export_text()
    assert "reward 0.25" in shown and "reward -0.5" in shown and "turn rewards (reward@end) 0.25@4, -0.5@6" in shown

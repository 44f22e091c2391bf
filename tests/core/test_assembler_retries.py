"""A client's retry of one request: the assembler trains the attempt the agent got, never the one it gave up on."""

from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.core.assembler import Attempt, Selection, SessionAssembler
from seamlessflow.core.prefix_tree import Call

DEFAULT_CONFIG = AssemblerOptions().assembler_config()


def call(call_id, prompt, completion):
    return Call(call_id, prompt, completion, [-0.5] * len(completion), [0] * len(completion))


def tokens(session):
    return [seq.tokens for seq in session.finish()]


def test_an_answered_first_attempt_is_dropped_when_its_retry_was_answered_too():
    session = SessionAssembler(DEFAULT_CONFIG)
    session.add(call("r1-a.0", [1, 2], [3]), Attempt("r1", 0))
    session.add(call("r1-b.0", [1, 2], [4]), Attempt("r1", 1))  # the retry generated anew: a fork
    session.add(call("r2.0", [1, 2, 4, 5], [6]), Attempt("r2", 0))  # the agent continued from the retry's answer
    assert tokens(session) == [[1, 2, 4, 5, 6]] and session.abandoned_attempts == 1


def test_the_highest_attempt_wins_whatever_the_order_they_were_recorded_in():
    session = SessionAssembler(DEFAULT_CONFIG)
    session.add(call("r1-b.0", [1, 2], [4]), Attempt("r1", 1))
    session.add(call("r1-a.0", [1, 2], [3]), Attempt("r1", 0))
    assert tokens(session) == [[1, 2, 4]]


def test_a_retry_that_generated_the_same_tokens_keeps_them_once():
    session = SessionAssembler(DEFAULT_CONFIG)
    session.add(call("r1-a.0", [1, 2], [3]), Attempt("r1", 0))
    session.add(call("r1-a.0", [1, 2], [3]), Attempt("r1", 1))  # greedy: the same record id again
    assert tokens(session) == [[1, 2, 3]] and session.abandoned_attempts == 0


def test_a_first_attempt_whose_retry_was_never_answered_is_kept():
    session = SessionAssembler(DEFAULT_CONFIG)
    session.add(call("r1-a.0", [1, 2], [3]), Attempt("r1", 0))
    assert tokens(session) == [[1, 2, 3]]


def test_separate_identical_requests_are_separate_samples():
    """Asking the same thing twice (not a retry: attempt 0 both times) keeps both answers, as any fork."""
    session = SessionAssembler(DEFAULT_CONFIG)
    session.add(call("r1-a.0", [1, 2], [3]), Attempt("r1", 0))
    session.add(call("r1-b.0", [1, 2], [4]), Attempt("r1", 0))
    assert tokens(session) == [[1, 2, 3], [1, 2, 4]]


def test_every_choice_of_an_abandoned_attempt_is_dropped_and_longest_selection_ignores_them():
    session = SessionAssembler(AssemblerOptions(selection=Selection.LONGEST).assembler_config())
    session.add(call("r1-a.0", [1, 2], [3, 3, 3]), Attempt("r1", 0))
    session.add(call("r1-a.1", [1, 2], [5, 5, 5]), Attempt("r1", 0))
    session.add(call("r1-b.0", [1, 2], [4]), Attempt("r1", 1))
    assert tokens(session) == [[1, 2, 4]] and session.abandoned_attempts == 2


def test_attempts_survive_the_round_trip_through_bytes():
    session = SessionAssembler(DEFAULT_CONFIG)
    session.add(call("r1-a.0", [1, 2], [3]), Attempt("r1", 0))
    again = SessionAssembler.from_bytes(session.to_bytes())
    again.add(call("r1-b.0", [1, 2], [4]), Attempt("r1", 1))
    assert tokens(again) == [[1, 2, 4]]

"""Readable cases for one session's assembler: duplicates, counts, bound, selection, round trip."""

import dataclasses

import pytest

from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.core.assembler import Selection, SessionAssembler, SessionStatus
from seamlessflow.core.assembly_invariants import check_against_calls, check_sequence
from seamlessflow.core.prefix_tree import Call, InvalidCall, Outcome, PromptBase


def call(call_id, prompt, completion, version=0):
    return Call(call_id, prompt, completion, [-0.25] * len(completion), [version] * len(completion))


DEFAULT_CONFIG = AssemblerOptions().assembler_config()


def three_turns_with_a_fork(config=DEFAULT_CONFIG):
    session = SessionAssembler(config)
    calls = [
        call("t1", [1, 2], [3]),
        call("t2", [1, 2, 3, 4], [5, 6], version=1),
        call("t3", [1, 2, 3, 7], [8]),
    ]
    outcomes = [session.add(c) for c in calls]
    return session, calls, outcomes


def test_outcomes_are_named_and_counted():
    session, _, outcomes = three_turns_with_a_fork()
    assert outcomes == [Outcome.START, Outcome.EXTENSION, Outcome.FORK]
    assert session.counts[Outcome.FORK] == 1 and session.counts[Outcome.EXTENSION] == 1


def test_same_call_id_again_is_ignored_as_duplicate():
    session, calls, _ = three_turns_with_a_fork()
    assert session.add(calls[1]) is Outcome.DUPLICATE
    assert len(session.finish()) == 2


def test_finish_gives_every_leaf_with_fork_count():
    session, calls, _ = three_turns_with_a_fork()
    first, second = session.finish()
    assert (first.branch_id, first.tokens) == (0, [1, 2, 3, 4, 5, 6])
    assert (second.branch_id, second.tokens) == (1, [1, 2, 3, 7, 8])
    assert first.loss_mask == [0, 0, 1, 0, 1, 1]
    assert first.versions == [-1, -1, 0, -1, 1, 1]
    assert first.fork_count == second.fork_count == 1
    by_id = {c.call_id: c for c in calls}
    assert check_against_calls(first, by_id) == [] and check_against_calls(second, by_id) == []


def test_longest_selection_keeps_one_leaf():
    session, _, _ = three_turns_with_a_fork(AssemblerOptions(selection=Selection.LONGEST).assembler_config())
    (only,) = session.finish()
    assert only.tokens == [1, 2, 3, 4, 5, 6]


def test_token_bound_marks_the_session_truncated_and_stops_growth():
    session = SessionAssembler(AssemblerOptions(max_tokens_per_session=5).assembler_config())
    assert session.add(call("t1", [1, 2], [3])) is Outcome.START
    assert session.add(call("t2", [1, 2, 3, 4], [5, 6])) is Outcome.TRUNCATED
    assert session.add(call("t3", [9], [])) is Outcome.TRUNCATED  # no growth after the cut
    assert session.status is SessionStatus.TRUNCATED
    (seq,) = session.finish()
    assert seq.truncated and seq.tokens == [1, 2, 3]
    assert check_sequence(seq) == []


def test_bytes_round_trip_mid_session_continues_identically():
    session, calls, _ = three_turns_with_a_fork()
    copy = SessionAssembler.from_bytes(session.to_bytes())
    follow_up = call("t4", [1, 2, 3, 7, 8, 9], [10])
    assert copy.add(follow_up) is session.add(follow_up) is Outcome.EXTENSION
    assert copy.add(calls[0]) is session.add(calls[0]) is Outcome.DUPLICATE
    assert copy.finish() == session.finish()
    assert copy.counts == session.counts


def test_check_sequence_catches_a_wrong_logprob():
    session, _, _ = three_turns_with_a_fork()
    seq = session.finish()[0]
    seq.logprobs[-1] = -9.0
    assert check_sequence(seq)


def test_check_against_calls_catches_a_wrong_earlier_token():
    session, calls, _ = three_turns_with_a_fork()
    seq = session.finish()[0]
    tampered = {c.call_id: c for c in calls}
    tampered["t1"] = call("t1", [1, 2], [4])
    assert check_against_calls(seq, tampered)


def test_check_sequence_catches_a_fed_token_with_a_logprob_or_version_and_a_bad_mask():
    session, _, _ = three_turns_with_a_fork()
    seq = session.finish()[0]
    fed = seq.loss_mask.index(0)
    for name, value, message in [
        ("logprobs", -0.5, "carries a logprob"),
        ("logprobs", float("nan"), "carries a logprob"),
        ("versions", 3, "carries a logprob or version"),
        ("loss_mask", 2, "other than 0 and 1"),
    ]:
        bad = dataclasses.replace(seq, **{name: list(getattr(seq, name))})
        getattr(bad, name)[fed] = value
        assert any(message in p for p in check_sequence(bad)), (name, value)
    assert check_sequence(dataclasses.replace(seq, logprobs=[-0.0 if x == 0.0 else x for x in seq.logprobs])) == []


def test_a_prompt_delta_is_the_base_sequences_ids_then_its_own():
    session = SessionAssembler(DEFAULT_CONFIG)
    session.add(Call("c1", [1, 2, 3], [4, 5], [-0.1, -0.2], [0, 0]))
    delta = Call("c2", [6], [7], [-0.3], [1], PromptBase("c1", 5))
    assert list(session.resolve(delta).prompt_ids) == [1, 2, 3, 4, 5, 6]
    assert session.add(delta) is Outcome.EXTENSION
    fork = Call("c3", [9], [8], [-0.4], [1], PromptBase("c2", 4))  # cuts inside c1's completion: a fork
    assert session.add(fork) is Outcome.FORK
    assert [s.tokens for s in session.finish()] == [[1, 2, 3, 4, 5, 6, 7], [1, 2, 3, 4, 9, 8]]


def test_a_delta_whose_base_the_session_does_not_hold_is_invalid():
    session = SessionAssembler(DEFAULT_CONFIG)
    session.add(Call("c1", [1, 2], [3], [-0.1], [0]))
    with pytest.raises(InvalidCall, match="not stored"):
        session.add(Call("c2", [4], [5], [-0.1], [0], PromptBase("nope", 1)))
    with pytest.raises(InvalidCall, match="not stored"):
        session.add(Call("c3", [4], [5], [-0.1], [0], PromptBase("c1", 4)))  # longer than c1's 3 ids
    assert session.add(Call("c2", [4], [5], [-0.1], [0], PromptBase("c1", 3))) is Outcome.EXTENSION  # not seen


def test_a_truncated_session_counts_a_delta_without_resolving_it():
    session = SessionAssembler(AssemblerOptions(max_tokens_per_session=4).assembler_config())
    session.add(Call("c1", [1, 2], [3], [-0.1], [0]))
    assert session.add(Call("c2", [1, 2, 3, 4], [5], [-0.1], [0])) is Outcome.TRUNCATED
    assert session.add(Call("c3", [6], [7], [-0.1], [0], PromptBase("c2", 5))) is Outcome.TRUNCATED

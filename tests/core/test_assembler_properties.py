"""Property tests: random agent sessions come out bit-exact.

A random "agent" keeps the histories it has seen (each earlier call's prompt + completion) and
issues calls that extend one (with tool/user gap tokens), rewrite one (cut and diverge), retry a
prompt, sample n>1 choices, restart from scratch, or resend an earlier call (duplicate). A small
token alphabet makes accidental shared prefixes common, which is where matching goes wrong.
"""

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.core.assembler import Selection, SessionAssembler
from seamlessflow.core.assembly_invariants import check_against_calls
from seamlessflow.core.prefix_tree import Call, Outcome, PromptBase
from seamlessflow.testing.sessions import sessions

DEFAULT_CONFIG = AssemblerOptions().assembler_config()


def assemble(sent, config=DEFAULT_CONFIG):
    session = SessionAssembler(config)
    outcomes = [session.add(c) for c in sent]
    return session, outcomes


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_every_sequence_is_bit_exact_and_every_call_survives(sent):
    session, outcomes = assemble(sent)
    calls = {c.call_id: c for c in sent}
    sequences = session.finish()
    for seq in sequences:
        assert check_against_calls(seq, calls) == []
    branching = [o for o in outcomes if o in (Outcome.START, Outcome.RESTART, Outcome.FORK)]
    assert len(sequences) == len(branching)
    assert [s.branch_id for s in sequences] == list(range(len(sequences)))
    for c in calls.values():  # nothing stored is ever lost: some leaf still starts with the call
        full = list(c.prompt_ids) + list(c.completion_ids)
        assert any(s.tokens[: len(full)] == full and any(
            e.call_id == c.call_id and e.end == len(full) for e in s.lineage) for s in sequences)


@settings(max_examples=80, deadline=None)
@given(sessions(), st.data())
def test_round_trip_at_any_point_changes_nothing(sent, data):
    cut = data.draw(st.integers(0, len(sent)))
    straight, straight_outcomes = assemble(sent)
    first, outcomes = assemble(sent[:cut])
    resumed = SessionAssembler.from_bytes(first.to_bytes())
    outcomes += [resumed.add(c) for c in sent[cut:]]
    assert outcomes == straight_outcomes
    assert resumed.finish() == straight.finish()


@settings(max_examples=80, deadline=None)
@given(sessions(), st.integers(1, 60))
def test_token_bound_is_never_exceeded_and_truncated_output_stays_exact(sent, bound):
    session, _ = assemble(sent, AssemblerOptions(max_tokens_per_session=bound).assembler_config())
    assert session.total_tokens <= bound
    calls = {c.call_id: c for c in sent}
    for seq in session.finish():
        assert check_against_calls(seq, calls) == []


@settings(max_examples=50, deadline=None)
@given(sessions())
def test_longest_selection_is_one_of_all_leaves(sent):
    all_leaves, _ = assemble(sent)
    longest, _ = assemble(sent, AssemblerOptions(selection=Selection.LONGEST).assembler_config())
    (only,) = longest.finish()
    everything = all_leaves.finish()
    assert only in everything
    assert len(only.tokens) == max(len(s.tokens) for s in everything)


@settings(max_examples=10, deadline=None)
@given(sessions(max_calls=60, max_chunk=400))
def test_very_long_histories(sent):
    session, _ = assemble(sent)
    calls = {c.call_id: c for c in sent}
    for seq in session.finish():
        assert check_against_calls(seq, calls) == []


def as_deltas(sent: list[Call]) -> list[Call]:
    """The calls as a proxy records them with prompt deltas: against the earlier call (first sending) whose
    sequence shares the longest prefix with the prompt, when that prefix is not empty."""
    sequences: dict[str, list[int]] = {}
    out = []
    for call in sent:
        prompt = list(call.prompt_ids)
        best, length = None, 0
        for call_id, seq in sequences.items():
            n = next(
                (i for i, (a, b) in enumerate(zip(seq, prompt, strict=False)) if a != b), min(len(seq), len(prompt))
            )
            if n > length:
                best, length = call_id, n
        sequences.setdefault(call.call_id, prompt + list(call.completion_ids))
        if best is None:
            out.append(call)
        else:
            out.append(Call(call.call_id, prompt[length:], call.completion_ids, call.logprobs, call.versions,
                            PromptBase(best, length)))
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(sessions())
def test_a_session_recorded_as_prompt_deltas_assembles_to_the_same_sequences(sent):
    full, _ = assemble(sent)
    delta, _ = assemble(as_deltas(sent))
    assert delta.finish() == full.finish()
    assert delta.counts == full.counts

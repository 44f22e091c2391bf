"""Each call's provenance on the sequences it wrote: its sampling temperature per generated token, the adapter that
served it, and the tokens whose logprob the engine did not give (NaN), through forks and the snapshot."""

import math

import pytest

from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.core.assembler import Provenance, SessionAssembler
from seamlessflow.core.assembly_invariants import check_against_calls, check_sequence
from seamlessflow.core.prefix_tree import Call

NAN = float("nan")
CONFIG = AssemblerOptions().assembler_config()


def call(call_id, prompt, completion, logprobs=None):
    return Call(call_id, prompt, completion, logprobs or [-0.25] * len(completion), [0] * len(completion))


def session_of(*added):
    """A session fed (call, provenance) pairs; the calls by id, for `check_against_calls`."""
    session = SessionAssembler(CONFIG)
    for c, provenance in added:
        session.add(c, provenance=provenance)
    return session, {c.call_id: c for c, _ in added}


def test_each_generated_token_carries_its_calls_temperature_through_a_fork():
    session, _ = session_of(
        (call("t1", [1, 2], [3]), Provenance(temperature=0.5)),
        (call("t2", [1, 2, 3, 4], [5, 6]), Provenance()),
        (call("t3", [1, 2, 3, 7], [8]), Provenance(temperature=0.25)),  # forks after t1's completion
    )
    first, second = session.finish()
    assert first.temperatures == [1.0, 1.0, 0.5, 1.0, 1.0, 1.0]
    assert second.temperatures == [1.0, 1.0, 0.5, 1.0, 0.25]
    assert session.temperatures == {"t1": 0.5, "t3": 0.25}  # only what is not 1.0 is held


def test_temperatures_stay_empty_when_every_token_is_at_one():
    session, _ = session_of((call("t1", [1, 2], [3]), Provenance()), (call("t2", [1, 2, 3, 4], [5]), Provenance()))
    (seq,) = session.finish()
    assert seq.temperatures == [] and session.temperatures == {}


def test_a_leaf_names_the_adapter_of_its_calls():
    session, calls = session_of(
        (call("t1", [1, 2], [3]), Provenance("red")), (call("t2", [1, 2, 3, 4], [5]), Provenance("red")),
    )
    (seq,) = session.finish()
    assert (seq.adapters, seq.adapter) == (("red",), "red")
    assert check_against_calls(seq, calls) == []
    base, _ = session_of((call("t1", [1, 2], [3]), Provenance()))
    assert base.finish()[0].adapter is None and base.adapters == {}


@pytest.mark.parametrize("second", [Provenance(), Provenance("blue")])
def test_a_leaf_whose_tokens_two_adapters_generated_is_refused(second):
    session, _ = session_of((call("t1", [1, 2], [3]), Provenance("red")), (call("t2", [1, 2, 3, 4], [5]), second))
    (seq,) = session.finish()
    assert len(seq.adapters) == 2
    [problem] = check_sequence(seq)
    assert "calls of different adapters generated its tokens" in problem
    with pytest.raises(ValueError, match="several adapters"):
        _ = seq.adapter  # never one picked silently


def test_a_call_that_only_fed_tokens_to_a_fork_does_not_mix_its_adapter_in():
    """t1 (the base) wrote [1, 2] as its prompt; the fork keeps those fed ids and none of t1's generated ones."""
    session, calls = session_of((call("t1", [1, 2], [3]), Provenance()),
                                (call("t2", [1, 2, 9], [4]), Provenance("red")))
    base_leaf, fork = session.finish()
    assert [e.call_id for e in fork.lineage] == ["t1", "t2"]
    assert (base_leaf.adapter, fork.adapter) == (None, "red")
    assert check_against_calls(fork, calls) == []


def test_a_nan_logprob_is_kept_counted_and_sound():
    session, calls = session_of(
        (call("t1", [1, 2], [3, 4], [-0.5, NAN]), Provenance()),
        (call("t2", [1, 2, 3, 4, 5], [6], [NAN]), Provenance()),
        (call("t3", [1, 2, 3, 9], [7]), Provenance()),  # a fork inside t1's completion: the NaN is cut off
    )
    first, fork = session.finish()
    assert [math.isnan(x) for x in first.logprobs] == [False, False, False, True, False, True]
    assert (first.masked_tokens, fork.masked_tokens) == (2, 0)
    assert check_sequence(first) == [] and check_against_calls(first, calls) == []  # NaN == NaN here
    assert check_against_calls(fork, calls) == []


def test_a_wrong_logprob_beside_a_nan_is_still_caught():
    session, _ = session_of((call("t1", [1], [3, 4], [NAN, -0.5]), Provenance()))
    (seq,) = session.finish()
    seq.logprobs[2] = -0.75
    assert any("logprobs differ" in p for p in check_sequence(seq))
    seq.logprobs[1], seq.logprobs[2] = -0.25, -0.5  # a number where the engine gave none
    assert any("logprobs differ" in p for p in check_sequence(seq))


def test_the_snapshot_keeps_provenance_and_nan_and_reads_older_snapshots():
    session, _ = session_of(
        (call("t1", [1, 2], [3, 4], [NAN, -0.5]), Provenance("red", 0.5)),
        (call("t2", [1, 2, 3, 4, 5], [6]), Provenance("red", 0.5)),
    )
    copy = SessionAssembler.from_bytes(session.to_bytes())
    (seq,), (copied,) = session.finish(), copy.finish()
    assert (copied.temperatures, copied.adapters, copied.masked_tokens) == (seq.temperatures, ("red",), 1)
    assert math.isnan(copied.logprobs[2]) and check_sequence(copied) == []
    older = session.to_dict()
    del older["temperatures"], older["adapters"]
    (old,) = SessionAssembler.from_dict(older).finish()
    assert (old.temperatures, old.adapters) == ([], (None,))

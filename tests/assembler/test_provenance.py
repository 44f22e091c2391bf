"""The assembler carries each call's provenance onto its trajectories (SessionBook, real Avro records, no broker):
the temperature of "processed" logprobs per generated token, the adapter, and the generated tokens without a
logprob (NaN); a sequence two adapters generated is dead-lettered, never published under one of them."""

import dataclasses
import math

from seamlessflow.assembler.book import SessionBook
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.avro import Codec
from seamlessflow.core.prefix_tree import Call
from seamlessflow.testing.assembler_harness import episode_end, token_io

TOPIC = "x.session-events"
NAN = float("nan")


def run_session(*records):
    """One session's TokenIO records then its end, through a book; its output at the end."""
    book = SessionBook(AssemblerOptions(), Codec(), TOPIC, "teamA", "run1")
    messages = [*records, episode_end("s1")]
    for offset, message in enumerate(messages):
        out = book.on_record(0, offset, b"s1", book.codec.encode(message, TOPIC))
    return out


def record(call_id, prompt, completion, logprobs=None, **fields):
    call = Call(call_id, prompt, completion, logprobs or [-0.5] * len(completion), [0] * len(completion))
    return dataclasses.replace(token_io("s1", call), **fields)


def test_processed_logprobs_put_their_temperature_on_the_generated_tokens():
    out = run_session(record("c1", [1, 2], [3], temperature=0.5, logprob_space="processed"),
                      record("c2", [1, 2, 3, 4], [5, 6], temperature=0.25, logprob_space="processed"))
    (t,) = out.trajectories
    assert t.temperatures == [1.0, 1.0, 0.5, 1.0, 0.25, 0.25]


def test_raw_logprobs_are_at_temperature_one_whatever_the_call_sampled_at():
    out = run_session(record("c1", [1, 2], [3], temperature=0.5), record("c2", [1, 2, 3, 4], [5], temperature=0.5))
    (t,) = out.trajectories
    assert t.temperatures == []  # empty: 1.0 everywhere
    (t,) = run_session(record("c1", [1, 2], [3], temperature=1.0, logprob_space="processed")).trajectories
    assert t.temperatures == []


def test_the_trajectory_names_the_adapter_that_served_its_calls():
    out = run_session(record("c1", [1, 2], [3], adapter="red"), record("c2", [1, 2, 3, 4], [5], adapter="red"))
    assert [t.adapter for t in out.trajectories] == ["red"]
    assert [t.adapter for t in run_session(record("c1", [1, 2], [3])).trajectories] == [None]


def test_a_sequence_two_adapters_generated_is_dead_lettered():
    out = run_session(record("c1", [1, 2], [3], adapter="red"), record("c2", [1, 2, 3, 4], [5]))
    assert out.trajectories == []
    (letter,) = out.dead_letters
    assert "calls of different adapters generated its tokens ('red', the base)" in letter.reason


def test_generated_tokens_without_a_logprob_are_published_and_counted():
    out = run_session(record("c1", [1, 2], [3, 4], [NAN, -0.5], invalid_logprobs=1),
                      record("c2", [1, 2, 3, 4, 5], [6], [NAN], invalid_logprobs=1))
    assert out.dead_letters == []
    (t,) = out.trajectories
    assert t.masked_tokens == 2
    assert [math.isnan(x) for x in t.logprobs] == [False, False, True, False, False, True]

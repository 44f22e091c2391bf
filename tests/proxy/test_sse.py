"""The SSE splitter gives the same payloads however the socket cuts the stream."""

import random

from hypothesis import given
from hypothesis import strategies as st

from seamlessflow.proxy.sse import SSESplitter


def split_all(stream: bytes, cuts: list[int]) -> list[bytes]:
    splitter, out, start = SSESplitter(), [], 0
    for cut in sorted(cuts) + [len(stream)]:
        out += splitter.feed(stream[start:cut])
        start = cut
    return out + splitter.close()


def test_events_and_comments_in_one_piece():
    stream = b'data: {"a": 1}\n\n: a comment\n\ndata:{"b":2}\r\n\r\ndata: [DONE]\n\n'
    assert split_all(stream, []) == [b'{"a": 1}', b'{"b":2}', b"[DONE]"]


def test_a_last_line_without_a_newline_still_counts():
    assert split_all(b"data: 1\n\ndata: 2", []) == [b"1", b"2"]


@given(st.lists(st.binary(max_size=40).filter(lambda b: b"\n" not in b and b"\r" not in b), max_size=12),
       st.integers(0, 2**32))
def test_any_cuts_give_the_payloads_of_the_whole(payloads, seed):
    stream = b"".join(b"data: " + p + b"\n\n" for p in payloads)
    cuts = random.Random(seed).sample(range(len(stream) + 1), k=min(len(stream), 6))
    assert split_all(stream, cuts) == [p.strip() for p in payloads]

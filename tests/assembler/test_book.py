"""SessionBook without a broker: outputs, dead letters, offsets to commit, and a replay after a crash."""

import json

from seamlessflow.assembler.book import SessionBook
from seamlessflow.assembler.options import AssemblerOptions
from seamlessflow.avro import Codec
from seamlessflow.core.prefix_tree import Call
from seamlessflow.testing.assembler_harness import episode_end, token_io
from seamlessflow.testing.poison import assert_dead_lettered, poison_values

TOPIC = "x.session-events"


def book(**options):
    return SessionBook(AssemblerOptions(**options), Codec(), TOPIC, "teamA", "run1", clock=lambda: now[0])


now = [0.0]


def encoded(codec, records):
    return [(key, codec.encode(message, TOPIC)) for key, message in records]


def two_sessions():
    """s1 opens first and closes last; s2 runs inside it."""
    a1, a2 = Call("a1.0", [1, 2], [3], [-0.5], [0]), Call("a2.0", [1, 2, 3, 4], [5], [-0.25], [1])
    b1 = Call("b1.0", [7], [8], [-1.0], [0])
    return [("s1", token_io("s1", a1)), ("s2", token_io("s2", b1)), ("s2", episode_end("s2")),
            ("s1", token_io("s1", a2)), ("s1", episode_end("s1"))]


def feed(b, records, start=0):
    outs = []
    for offset, (key, value) in enumerate(records[start:], start):
        outs.append(b.on_record(0, offset, key.encode(), value))  # value None: a tombstone
    return outs


def test_episode_end_publishes_trajectories_keyed_by_group():
    b = book()
    outs = feed(b, encoded(b.codec, two_sessions()))
    (t2,) = outs[2].trajectories
    (t1,) = outs[4].trajectories
    assert (t2.event_id, t2.group_id, t2.tokens) == ("s2/0", "g-s2", [7, 8])
    assert (t1.tokens, t1.loss_mask, t1.status) == ([1, 2, 3, 4, 5], [0, 0, 1, 0, 1], "done")


def test_commit_offset_never_passes_an_open_session():
    b = book()
    records = encoded(b.codec, two_sessions())
    feed(b, records[:3])
    assert b.commit_offset(0) == 0  # s1 (offset 0) is still open
    feed(b, records, start=3)
    assert b.commit_offset(0) == 5


def test_replay_after_a_crash_rebuilds_without_publishing_twice():
    b = book()
    records = encoded(b.codec, two_sessions())
    feed(b, records[:4])  # s2 published; s1 open; crash here with marks saved at 4
    restarted = book()
    restarted.replay_end[0] = 4
    outs = feed(restarted, records, start=b.commit_offset(0))
    assert [len(o.trajectories) for o in outs] == [0, 0, 0, 0, 1]
    assert outs[-1].trajectories[0].tokens == [1, 2, 3, 4, 5]


def test_poison_duplicates_and_late_events():
    b = book()
    records = encoded(b.codec, two_sessions())
    outs = feed(b, records + [records[0], records[4], ("s1", b"\x00junk")])
    late, repeated_end, poison = outs[5:]
    assert "closed session" in late.dead_letters[0].reason
    assert repeated_end.dead_letters == [] and b.stats["duplicate_ends"] == 1
    assert "undecodable" in poison.dead_letters[0].reason and poison.dead_letters[0].offset == 7


def test_idle_sessions_get_one_abort_each():
    now[0] = 0.0
    b = book(idle_timeout_s=10)
    feed(b, encoded(b.codec, two_sessions()[:1]))
    assert b.idle_aborts() == []
    now[0] = 11.0
    (end,) = b.idle_aborts()
    assert (end.session_id, end.status) == ("s1", "aborted")
    assert b.idle_aborts() == []


def test_aborted_sessions_can_be_dropped():
    b = book(keep_aborted=False)
    records = encoded(b.codec, [two_sessions()[0], ("s1", episode_end("s1", status="aborted"))])
    assert [o.trajectories for o in feed(b, records)] == [[], []]


def test_each_kind_of_poison_is_dead_lettered_and_the_next_session_still_assembles():
    b = book()
    good = encoded(b.codec, two_sessions())
    values = poison_values(b.codec, TOPIC, two_sessions()[0][1])
    outs = feed(b, [("p", value) for value in values.values()] + [("p", None)] + good)
    letters = [letter for out in outs[:4] for letter in out.dead_letters]
    assert_dead_lettered(letters, values, TOPIC)
    assert "no value" in letters[-1].reason
    assert {letter.event_id for letter in letters} == {f"assembler:{TOPIC}/0/{offset}" for offset in range(4)}
    assert [t.event_id for out in outs[4:] for t in out.trajectories] == ["s2/0", "s1/0"]


def test_packed_array_and_pre_packing_records_assemble_to_identical_trajectories():
    """The same sessions written packed, as arrays, and with the v1 schema give equal trajectories, bit for bit."""
    import random
    import struct

    from seamlessflow.testing.samples import encode_before_packing

    rng = random.Random(3)
    history, records = [rng.randrange(50_000) for _ in range(50)], []
    for t in range(6):
        prompt = history + [rng.randrange(50_000) for _ in range(5)]
        if t == 4:
            prompt = prompt[:30] + [1, 2, 3]  # a rewritten history: a fork
        out = [rng.randrange(50_000) for _ in range(7)]
        call = Call(f"p{t}.0", prompt, out, [-rng.random() for _ in out], [t] * len(out))
        records.append(("s1", token_io("s1", call)))
        history = prompt + out
    records.append(("s1", episode_end("s1")))

    def assembled(encode):
        outs = feed(book(), [(key, encode(message)) for key, message in records])
        return [t for out in outs for t in out.trajectories]

    packed = assembled(lambda m: Codec().encode(m, TOPIC))
    arrays = assembled(lambda m: Codec(packed=False).encode(m, TOPIC))
    before = assembled(encode_before_packing)
    assert len(packed) == 2 and packed == arrays == before

    def bits(ts):
        return [struct.pack(f"<{len(t.logprobs)}d", *t.logprobs) for t in ts]

    assert bits(packed) == bits(arrays) == bits(before)


def test_a_session_that_ends_without_a_reward_carries_its_request_into_each_trajectory():
    import dataclasses
    import json

    from seamlessflow.rewards.request import REQUEST_KEY, pending_request

    request = {"verifier": "math", "submission": "3", "prompt": "q", "payload": {"answer": "3"}}
    b = book()
    end = dataclasses.replace(episode_end("s2", reward=0.0), info_json=json.dumps({REQUEST_KEY: request}))
    records = [r if r[1].__class__.__name__ != "EpisodeEnd" else ("s2", end) for r in two_sessions()[1:3]]
    [out] = [o for o in feed(b, encoded(b.codec, records)) if o.trajectories]
    assert [pending_request(t.info_json) for t in out.trajectories] == [request]
    plain = book()
    [done] = [o for o in feed(plain, encoded(plain.codec, two_sessions()[1:3])) if o.trajectories]
    assert pending_request(done.trajectories[0].info_json) is None


def test_per_call_rewards_land_on_the_turns_of_each_branch():
    """Rewards named by request id or by position reach the turns that request wrote, on every branch it is in;
    a key naming no request of the session is reported in the trajectory's info."""
    from dataclasses import replace

    a1, a2 = Call("a1.0", [1, 2], [3], [-0.5], [0]), Call("a2.0", [1, 2, 3, 4], [5], [-0.25], [0])
    fork = Call("b.0", [1, 2, 3, 9], [6], [-0.75], [0])  # the third request: position 2
    end = replace(episode_end("s1"), call_rewards={"a2": 1.0, "#2": 0.5, "#0": -0.25, "zz": 3.0})
    b = book()
    outs = feed(b, encoded(b.codec, [("s1", token_io("s1", c)) for c in (a1, a2, fork)] + [("s1", end)]))
    first, second = sorted(outs[-1].trajectories, key=lambda t: t.branch_id)
    assert (first.tokens, first.turn_ends, first.turn_rewards) == ([1, 2, 3, 4, 5], [3, 5], [-0.25, 1.0])
    assert (second.tokens, second.turn_ends, second.turn_rewards) == ([1, 2, 3, 9, 6], [3, 5], [-0.25, 0.5])
    assert json.loads(first.info_json)["call_rewards_unmatched"] == ["zz"]


def test_a_session_without_call_rewards_has_turns_rewarded_zero():
    b = book()
    outs = feed(b, encoded(b.codec, two_sessions()))
    (t1,) = outs[4].trajectories
    assert (t1.turn_ends, t1.turn_rewards) == ([3, 5], [0.0, 0.0])
    assert "call_rewards_unmatched" not in json.loads(t1.info_json)

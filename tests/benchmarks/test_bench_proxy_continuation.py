"""`benchmarks/bench_proxy.py --continuation`: the request bodies of its two ways, as a client of the Responses API
sends them (the whole conversation with `store: false`, or only the new message after `previous_response_id`)."""

from benchmarks.proxy_continuation import Conversation, user_text

OUTPUT = [{"type": "message", "id": "msg_1", "status": "completed", "role": "assistant",
           "content": [{"type": "output_text", "text": "t100 t101 ", "annotations": [], "logprobs": []}]}]


def test_the_whole_way_sends_every_message_and_output_item_so_far_and_stores_nothing() -> None:
    conversation = Conversation("whole", tokens=4)
    first = conversation.body("one")
    assert first == {"model": "stub-model", "max_output_tokens": 4, "store": False,
                     "input": [{"role": "user", "content": "one"}]}
    conversation.absorb({"id": "resp_1", "output": OUTPUT})
    second = conversation.body("two")
    assert second["input"] == [{"role": "user", "content": "one"}, *OUTPUT, {"role": "user", "content": "two"}]
    assert "previous_response_id" not in second and second["store"] is False
    assert first["input"] == [{"role": "user", "content": "one"}]  # a sent body is not changed afterwards


def test_the_continuation_way_stores_each_turn_and_sends_only_the_new_message_after_the_last_response() -> None:
    conversation = Conversation("continuation", tokens=4)
    assert conversation.body("one") == {"model": "stub-model", "max_output_tokens": 4, "store": True,
                                        "input": [{"role": "user", "content": "one"}]}
    for turn, response_id in enumerate(("resp_1", "resp_2")):
        conversation.absorb({"id": response_id, "output": OUTPUT})
        body = conversation.body(f"turn {turn}")
        assert body["input"] == [{"role": "user", "content": f"turn {turn}"}]
        assert body["previous_response_id"] == response_id and body["store"] is True


def test_user_messages_have_the_asked_size_and_differ_by_conversation_and_turn() -> None:
    texts = {user_text(name, turn, 200) for name in ("a-0", "a-1") for turn in range(3)}
    assert len(texts) == 6 and {len(text) for text in texts} == {200}
    assert user_text("a-0", 0, 5) == "[a-0 turn 1] "  # never cut below its label

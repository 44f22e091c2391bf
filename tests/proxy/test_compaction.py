"""`POST /v1/responses/compact` in front of a StubEngine, driven by the real `openai` SDK: the summary is a
recorded call of the session, the answer is every user message then one compaction item, and that item sent
back as input is the summary the model sees. That what follows a compaction is a new branch of the trajectory,
on a real engine's tokens: tests/proxy/test_compaction_vllm.py."""

from __future__ import annotations

import httpx
import openai
import pytest

from seamlessflow.messages import TokenIO
from seamlessflow.proxy.compact_door import COMPACT_MAX_TOKENS, COMPACT_PROMPT
from seamlessflow.proxy.items import SUMMARY_PREFIX, compacted_summary, compaction_content
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.stored_responses import agent


async def test_compact_summarises_with_the_policy_and_answers_user_messages_then_a_compaction_item(
    proxy, stub, settings, codec
):
    client = agent(proxy, "cmp")
    history = [{"role": "user", "content": "fix the bug"}, {"role": "assistant", "content": "done: see diff"},
               {"type": "function_call", "call_id": "c1", "name": "run", "arguments": "{}"},
               {"type": "function_call_output", "call_id": "c1", "output": "ok"},
               {"role": "user", "content": "now add a test"}]
    compacted = await client.responses.compact(model="m", instructions="be exact", input=history)
    assert compacted.object == "response.compaction" and compacted.usage.output_tokens > 0
    model, sent = stub.requests[-1][1]["model"], stub.requests[-1][1]
    assert sent["messages"][0] == {"role": "system", "content": "be exact"} and model == "m"
    assert sent["messages"][-1] == {"role": "user", "content": COMPACT_PROMPT}
    assert sent["max_tokens"] == COMPACT_MAX_TOKENS and not sent.get("tools")
    *kept, item = compacted.output
    assert [(m.role, m.content[0].text) for m in kept] == [("user", "fix the bug"), ("user", "now add a test")]
    assert item.type == "compaction" and item.id.startswith("cmp_")
    [call] = [e for e in await session_events(settings, codec, "cmp") if isinstance(e, TokenIO)]
    assert call.completion_ids  # the summary is a recorded generation of the session
    summary = compacted_summary({"encrypted_content": item.encrypted_content})

    given = [o.model_dump(warnings=False) for o in compacted.output]  # the SDK types output messages as assistant's
    after = await client.responses.create(model="m", input=[*given,
                                                            {"role": "user", "content": "go on"}],
                                          max_output_tokens=2)
    seen = stub.requests[-1][1]["messages"]
    assert [m["role"] for m in seen] == ["user", "user", "user", "user"]
    assert seen[2]["content"] == summary != SUMMARY_PREFIX and seen[3]["content"] == "go on"
    assert [i.type for i in (await client.responses.input_items.list(after.id, order="asc")).data] == [
        "message", "message", "compaction", "message"]


async def test_compact_continues_a_stored_response_and_stores_nothing(proxy, stub):
    client = agent(proxy, "cmp-prev")
    first = await client.responses.create(model="m", input="remember 7", max_output_tokens=2)
    compacted = await client.responses.compact(model="m", previous_response_id=first.id, input="and 8",
                                               extra_body={"max_output_tokens": 3})
    sent = stub.requests[-1][1]
    assert [m["content"] for m in sent["messages"]] == ["remember 7", first.output_text, "and 8", COMPACT_PROMPT]
    assert sent["max_tokens"] == 3
    assert [m.content[0].text for m in compacted.output[:-1]] == ["remember 7", "and 8"]
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(compacted.id)


@pytest.mark.parametrize(("body", "words"), [
    ({"input": "x", "stream": True}, "'stream'"),
    ({"input": "x", "conversation": "conv_1"}, "'conversation'"),
    ({}, "'input' or 'previous_response_id'"),
    ({"input": 5}, "'input'"),
    ({"input": "x", "instructions": 5}, "'instructions'"),
    ({"input": "x", "previous_response_id": "resp_none"}, "not found"),
])
async def test_bad_compact_requests_get_a_400(proxy, body, words):
    async with httpx.AsyncClient(headers={"Authorization": "Bearer key-alpha"}) as http:
        response = await http.post(proxy.base_url + "/responses/compact", json={"model": "m", **body})
    assert response.status_code == 400 and words in response.json()["error"]["message"], response.text


async def test_a_compaction_item_the_proxy_did_not_make_is_refused(proxy):
    client = agent(proxy, "cmp-bad")
    for content in ("gAAAAB-openai-encrypted", compaction_content("x")[:-2] + "!!"):
        with pytest.raises(openai.BadRequestError, match="compaction item"):
            await client.responses.create(model="m", input=[{"type": "compaction", "encrypted_content": content}])

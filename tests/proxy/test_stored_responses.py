"""Stored Responses (`store`, `previous_response_id`, GET / input_items / DELETE) in front of a StubEngine (a fake
engine), driven by the real `openai` SDK: state on the responses topic, served by any worker, after a restart,
to its own team only; the API's error shapes; too large to store. The same against a real engine:
tests/proxy/test_stored_responses_vllm.py."""

from __future__ import annotations

import asyncio

import httpx
import openai
import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import StoredResponse, TokenIO
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.stored_responses import agent, own_proxy
from seamlessflow.topics import Topics


def stored_on_topic(settings, codec) -> list:
    return read_messages(settings, Topics(settings).responses, codec)


async def test_a_stored_response_reads_back_lists_its_input_and_deletes_to_a_404(proxy, settings, codec):
    client = agent(proxy, "s1")
    created = await client.responses.create(
        model="m", instructions="be brief", max_output_tokens=3,
        input=[{"role": "user", "content": "one"},
               {"role": "user", "content": [{"type": "input_text", "text": "two"}]}],
    )
    assert created.store is True and created.instructions == "be brief"
    again = await client.responses.retrieve(created.id)
    assert again.model_dump() == created.model_dump()
    items = await client.responses.input_items.list(created.id, order="asc")
    assert [i.content[0].text for i in items.data] == ["one", "two"] and items.has_more is False
    newest = await client.responses.input_items.list(created.id, limit=1)
    assert newest.data[0].content[0].text == "two" and newest.has_more is True
    after = await client.responses.input_items.list(created.id, order="asc", after=items.data[0].id)
    assert [i.id for i in after.data] == [items.data[1].id]
    [record] = stored_on_topic(settings, codec)
    assert (record.response_id, record.team, record.session_id) == (created.id, "alpha", "s1")
    assert record.completion_ids == (await session_events(settings, codec, "s1"))[0].completion_ids

    await client.responses.delete(created.id)
    for read in (client.responses.retrieve(created.id), client.responses.input_items.list(created.id),
                 client.responses.delete(created.id)):
        with pytest.raises(openai.NotFoundError, match="not found"):
            await read
    with pytest.raises(openai.BadRequestError, match="Previous response with id"):
        await client.responses.create(model="m", input="more", previous_response_id=created.id)


async def test_a_continuation_sends_the_stored_conversation_then_the_new_input_in_the_same_session(
    proxy, stub, settings, codec
):
    client = agent(proxy)  # no session named: the first call makes one, continuations join it
    first = await client.responses.create(model="m", instructions="sys", input="hello", max_output_tokens=2)
    second = await client.responses.create(model="m", instructions="sys", input="and then?", max_output_tokens=2,
                                           previous_response_id=first.id, stream=True)
    done = [e async for e in second][-1].response
    assert done.previous_response_id == first.id and done.store is True
    third = await client.responses.create(model="m", input="last", previous_response_id=done.id, max_output_tokens=2)
    assert stub.requests[-1][1]["messages"] == [
        {"role": "user", "content": "hello"},
        {"role": "assistant", "content": first.output_text},
        {"role": "user", "content": "and then?"},
        {"role": "assistant", "content": done.output_text},
        {"role": "user", "content": "last"},
    ]  # no instructions on the third call: the API does not carry them over
    assert stub.requests[-2][1]["messages"][0] == {"role": "system", "content": "sys"}
    calls = [e for e in await session_events(settings, codec) if isinstance(e, TokenIO)]
    assert len(calls) == 3 and len({c.session_id for c in calls}) == 1
    assert (await client.responses.retrieve(third.id)).previous_response_id == done.id
    listed = (await client.responses.input_items.list(third.id, order="asc")).data  # the whole conversation's
    assert [i.role for i in listed] == ["user", "assistant", "user", "assistant", "user"]
    newest = (await client.responses.input_items.list(third.id, limit=1)).data
    assert listed[-1].content[0].text == "last" and [i.id for i in newest] == [listed[-1].id]


async def test_a_function_call_continues_with_its_output(proxy, stub):
    client = agent(proxy, "fn")
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    first = await client.responses.create(model="m", input="look it up", tools=tools, max_output_tokens=2)
    [call] = [item for item in first.output if item.type == "function_call"]
    await client.responses.create(
        model="m", previous_response_id=first.id, tools=tools, tool_choice="none", max_output_tokens=2,
        input=[{"type": "function_call_output", "call_id": call.call_id, "output": "42"}],
    )
    assert stub.requests[-1][1]["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.call_id, "type": "function", "function": {"name": "lookup", "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "42"},
    ]


async def test_another_team_never_reads_deletes_or_continues_a_stored_response(proxy):
    mine = await agent(proxy, "own").responses.create(model="m", input="secret", max_output_tokens=2)
    theirs = agent(proxy, key="key-beta")
    for attempt in (theirs.responses.retrieve(mine.id), theirs.responses.input_items.list(mine.id),
                    theirs.responses.delete(mine.id)):
        with pytest.raises(openai.NotFoundError):
            await attempt
    with pytest.raises(openai.BadRequestError, match="not found"):
        await theirs.responses.create(model="m", input="x", previous_response_id=mine.id)
    assert (await agent(proxy).responses.retrieve(mine.id)).id == mine.id  # still there for its team


async def test_store_false_keeps_nothing(proxy, settings, codec):
    client = agent(proxy, "nostore")
    reply = await client.responses.create(model="m", input="x", store=False, max_output_tokens=2)
    assert reply.store is False
    with pytest.raises(openai.NotFoundError):
        await client.responses.retrieve(reply.id)
    with pytest.raises(openai.BadRequestError, match="not found"):
        await client.responses.create(model="m", input="y", previous_response_id=reply.id)
    assert stored_on_topic(settings, codec) == []


@pytest.mark.parametrize(("body", "words"), [
    ({"previous_response_id": ""}, "'previous_response_id'"),
    ({"previous_response_id": 7}, "'previous_response_id'"),
    ({"store": "yes"}, "'store'"),
])
async def test_bad_state_fields_get_a_400(proxy, body, words):
    async with httpx.AsyncClient() as http:
        response = await http.post(proxy.base_url + "/responses", json={"model": "m", "input": "x", **body},
                                   headers={"Authorization": "Bearer key-alpha"})
    assert response.status_code == 400 and words in response.json()["error"]["message"]


async def test_bad_list_parameters_and_a_continuation_from_another_session_get_a_400(proxy):
    client = agent(proxy, "here")
    first = await client.responses.create(model="m", input="x", max_output_tokens=2)
    async with httpx.AsyncClient(headers={"Authorization": "Bearer key-alpha"}) as http:
        for query in ("limit=0", "limit=101", "limit=x", "order=sideways"):
            response = await http.get(f"{proxy.base_url}/responses/{first.id}/input_items?{query}")
            assert response.status_code == 400, query
            assert response.json()["error"]["type"] == "invalid_request_error"
        missing = await http.get(f"{proxy.base_url}/responses/resp_nothing")
        assert missing.status_code == 404 and missing.json()["error"]["param"] == "response_id"
    with pytest.raises(openai.BadRequestError, match="another session"):
        await agent(proxy, "elsewhere").responses.create(model="m", input="y", previous_response_id=first.id)


async def test_any_worker_serves_what_another_stored_and_a_delete_reaches_them_all(proxy_factory, stub):
    first, second = await proxy_factory([stub]), await proxy_factory([stub])
    made = await agent(first, "w").responses.create(model="m", input="x", max_output_tokens=2)
    assert (await agent(second).responses.retrieve(made.id)).id == made.id  # read through: waits for the topic
    later = await agent(second, "w").responses.create(model="m", input="y", previous_response_id=made.id,
                                                       max_output_tokens=2)
    await agent(first).responses.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        await agent(second).responses.retrieve(made.id)
    assert (await agent(first).responses.retrieve(later.id)).previous_response_id == made.id


async def test_a_restarted_proxy_serves_the_stored_responses(proxy_factory, stub, settings, tmp_path):
    before = await own_proxy(settings, stub, tmp_path)
    made = await agent(before, "r").responses.create(model="m", input="x", max_output_tokens=2)
    await before.stop()
    after = await proxy_factory([stub])
    assert (await agent(after).responses.retrieve(made.id)).output_text == made.output_text


async def test_retention_is_per_team(proxy_factory, stub):
    proxy = await proxy_factory([stub], stored_retention_by_team={"alpha": 0.2})
    made = await agent(proxy).responses.create(model="m", input="x", max_output_tokens=2)
    kept = await agent(proxy, key="key-beta").responses.create(model="m", input="x", max_output_tokens=2)
    await asyncio.sleep(0.3)
    with pytest.raises(openai.NotFoundError):
        await agent(proxy).responses.retrieve(made.id)
    assert (await agent(proxy, key="key-beta").responses.retrieve(kept.id)).id == kept.id


async def test_a_response_too_large_to_store_is_refused_and_nothing_is_written(settings, stub, tmp_path, codec):
    small = settings.with_overrides(max_record_bytes=6000)
    proxy = await own_proxy(small, stub, tmp_path)
    try:
        client = agent(proxy, "big")
        with pytest.raises(openai.BadRequestError, match="6000-byte record limit"):
            await client.responses.create(model="m", input="x" * 5000, max_output_tokens=2)  # before generating
        assert await session_events(small, codec, "big") == []
        with pytest.raises(openai.BadRequestError, match="too large to store"):  # after: the reply's ids push it over
            await client.responses.create(model="m", input="x" * 1200, max_output_tokens=2)
        stream = await client.responses.create(model="m", input="x" * 1200, max_output_tokens=2, stream=True)
        events = [e async for e in stream]  # the stream ends in an error event (the SDK hands it over as one)
        assert events[-1].type == "error" and "too large to store" in events[-1].message, events[-1]
        fits = await client.responses.create(model="m", input="x" * 1200, max_output_tokens=2, store=False)
        assert fits.store is False
    finally:
        await proxy.stop()
    assert stored_on_topic(small, codec) == []


def test_the_stored_record_names_its_team_and_session():
    names = {f for f in StoredResponse.__dataclass_fields__}
    assert {"team", "session_id", "response_id", "prompt_ids", "completion_ids", "versions"} <= names

"""The Conversations API and the `conversation` parameter of a Responses call, in front of a StubEngine (a fake
engine), driven by the real `openai` SDK: items kept on the conversations topic, a response sees them and adds
its own, any worker and a restarted proxy serve them, a team reads only its own, the API's shapes and errors."""

from __future__ import annotations

import asyncio
import os
import signal

import httpx
import openai
import pytest

from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import StoredConversation, TokenIO
from seamlessflow.testing.proxy_harness import session_events
from seamlessflow.testing.proxy_workers import start_workers, wait_ready
from seamlessflow.testing.stored_responses import agent, own_proxy
from seamlessflow.topics import Topics


def on_topic(settings, codec) -> list:
    return read_messages(settings, Topics(settings).conversations, codec)


async def test_a_conversation_is_created_read_listed_added_to_and_deleted(proxy, settings, codec):
    client = agent(proxy)
    made = await client.conversations.create(items=[{"role": "user", "content": "hi"}], metadata={"topic": "demo"})
    assert made.id.startswith("conv_") and made.object == "conversation" and made.metadata == {"topic": "demo"}
    assert (await client.conversations.retrieve(made.id)).model_dump() == made.model_dump()
    added = await client.conversations.items.create(made.id, items=[
        {"type": "message", "role": "assistant", "content": "hello"}, {"role": "user", "content": "and?"}])
    assert [i.role for i in added.data] == ["assistant", "user"] and added.has_more is False
    listed = (await client.conversations.items.list(made.id, order="asc")).data
    assert [(i.role, i.content[0].text) for i in listed] == [("user", "hi"), ("assistant", "hello"), ("user", "and?")]
    assert len({i.id for i in listed}) == 3
    newest = await client.conversations.items.list(made.id, limit=1)
    assert [i.id for i in newest.data] == [listed[-1].id] and newest.has_more is True
    [record] = [m for m in on_topic(settings, codec) if isinstance(m, StoredConversation)][-1:]
    assert (record.conversation_id, record.team, record.session_id) == (made.id, "alpha", None)

    deleted = await client.conversations.delete(made.id)
    assert deleted.deleted is True and deleted.object == "conversation.deleted"
    for read in (client.conversations.retrieve(made.id), client.conversations.items.list(made.id),
                 client.conversations.delete(made.id),
                 client.conversations.items.create(made.id, items=[{"role": "user", "content": "x"}])):
        with pytest.raises(openai.NotFoundError, match="not found"):
            await read
    with pytest.raises(openai.NotFoundError, match="Conversation with id"):
        await client.responses.create(model="m", input="more", conversation=made.id)


async def test_a_response_in_a_conversation_sees_its_items_and_adds_its_own(proxy, stub, settings, codec):
    client = agent(proxy)  # no session named: the first response picks one, the conversation keeps it
    conversation = await client.conversations.create(items=[{"role": "user", "content": "remember 7"}])
    first = await client.responses.create(model="m", instructions="sys", input="what was it?", max_output_tokens=2,
                                          conversation=conversation.id)
    assert first.conversation is not None and first.conversation.id == conversation.id
    assert stub.requests[-1][1]["messages"] == [{"role": "system", "content": "sys"},
                                                {"role": "user", "content": "remember 7"},
                                                {"role": "user", "content": "what was it?"}]
    streamed = await client.responses.create(model="m", input="again", max_output_tokens=2, stream=True,
                                             conversation={"id": conversation.id})
    second = [e async for e in streamed][-1].response
    assert stub.requests[-1][1]["messages"] == [{"role": "user", "content": "remember 7"},
                                                {"role": "user", "content": "what was it?"},
                                                {"role": "assistant", "content": first.output_text},
                                                {"role": "user", "content": "again"}]
    items = (await client.conversations.items.list(conversation.id, order="asc")).data
    assert [(i.type, i.role) for i in items] == [("message", "user"), ("message", "user"), ("message", "assistant"),
                                                 ("message", "user"), ("message", "assistant")]
    assert items[2].id == first.output[0].id and items[4].id == second.output[0].id
    calls = [e for e in await session_events(settings, codec) if isinstance(e, TokenIO)]
    assert len(calls) == 2 and len({c.session_id for c in calls}) == 1  # one session for the conversation
    assert (await client.responses.retrieve(second.id)).conversation.id == conversation.id


async def test_a_function_call_in_a_conversation_continues_with_its_output(proxy, stub):
    client = agent(proxy, "conv-fn")
    tools = [{"type": "function", "name": "lookup", "parameters": {"type": "object"}}]
    conversation = await client.conversations.create()
    first = await client.responses.create(model="m", input="look it up", tools=tools, max_output_tokens=2,
                                          conversation=conversation.id, store=False)
    [call] = [item for item in first.output if item.type == "function_call"]
    await client.responses.create(model="m", conversation=conversation.id, tools=tools, tool_choice="none",
                                  input=[{"type": "function_call_output", "call_id": call.call_id, "output": "42"}],
                                  max_output_tokens=2)
    assert stub.requests[-1][1]["messages"][1:] == [
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": call.call_id, "type": "function", "function": {"name": "lookup", "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "42"},
    ]  # store: false keeps no response, yet the conversation keeps its items


async def test_another_team_never_reads_adds_to_deletes_or_answers_in_a_conversation(proxy):
    mine = await agent(proxy).conversations.create(items=[{"role": "user", "content": "secret"}])
    theirs = agent(proxy, key="key-beta")
    for attempt in (theirs.conversations.retrieve(mine.id), theirs.conversations.items.list(mine.id),
                    theirs.conversations.delete(mine.id),
                    theirs.conversations.items.create(mine.id, items=[{"role": "user", "content": "x"}]),
                    theirs.responses.create(model="m", input="x", conversation=mine.id)):
        with pytest.raises(openai.NotFoundError):
            await attempt
    assert len((await agent(proxy).conversations.items.list(mine.id)).data) == 1  # untouched for its team


async def test_bad_conversation_requests_get_the_apis_400(proxy):
    client = agent(proxy, "here")
    made = await client.conversations.create()
    await client.responses.create(model="m", input="x", conversation=made.id, max_output_tokens=2)
    with pytest.raises(openai.BadRequestError, match="another session"):
        await agent(proxy, "elsewhere").responses.create(model="m", input="y", conversation=made.id)
    earlier = await client.responses.create(model="m", input="x", max_output_tokens=2)
    with pytest.raises(openai.BadRequestError, match="Mutually exclusive"):
        await client.responses.create(model="m", input="y", conversation=made.id, previous_response_id=earlier.id)
    async with httpx.AsyncClient(headers={"Authorization": "Bearer key-alpha"}) as http:
        bad = {"conversation": 7, "items": [{"type": "image", "url": "x"}], "metadata": {"k": 1}, "limit": 0}
        for method, path, body in (
            ("POST", "/responses", {"model": "m", "input": "x", "conversation": bad["conversation"]}),
            ("POST", "/responses", {"model": "m", "input": "x", "conversation": {"id": ""}}),
            ("POST", "/conversations", {"items": bad["items"]}),
            ("POST", "/conversations", {"items": [{"role": "user", "content": "x"}] * 21}),
            ("POST", "/conversations", {"metadata": bad["metadata"]}),
            ("POST", "/conversations", [1]),
            ("POST", f"/conversations/{made.id}/items", {"items": []}),
            ("GET", f"/conversations/{made.id}/items?limit=0", None),
        ):
            response = await http.request(method, proxy.base_url + path, json=body)
            assert response.status_code == 400, (path, body, response.text)
            assert response.json()["error"]["type"] == "invalid_request_error"


async def test_any_worker_and_a_restarted_proxy_serve_a_conversation(proxy_factory, stub, settings, tmp_path):
    before = await own_proxy(settings, stub, tmp_path)
    made = await agent(before).conversations.create(items=[{"role": "user", "content": "one"}])
    other = await proxy_factory([stub])
    await agent(other).conversations.items.create(made.id, items=[{"role": "user", "content": "two"}])
    await agent(before).responses.create(model="m", input="three", conversation=made.id, max_output_tokens=2)
    await before.stop()
    after = await proxy_factory([stub])
    texts = [i.content[0].text for i in (await agent(after).conversations.items.list(made.id, order="asc")).data]
    assert texts[:3] == ["one", "two", "three"] and len(texts) == 4
    await agent(other).conversations.delete(made.id)
    with pytest.raises(openai.NotFoundError):
        await agent(after).conversations.retrieve(made.id)


async def test_a_conversation_too_large_to_store_is_refused_before_generating(settings, stub, tmp_path, codec):
    small = settings.with_overrides(max_record_bytes=4000)
    proxy = await own_proxy(small, stub, tmp_path)
    try:
        client = agent(proxy, "big")
        with pytest.raises(openai.BadRequestError, match="too large to store"):
            await client.conversations.create(items=[{"role": "user", "content": "x" * 5000}])
        made = await client.conversations.create(items=[{"role": "user", "content": "x" * 1500}])
        with pytest.raises(openai.BadRequestError, match="4000-byte record limit"):
            await client.responses.create(model="m", input="y" * 1500, conversation=made.id, max_output_tokens=2)
        assert await session_events(small, codec, "big") == []
        assert len((await client.conversations.items.list(made.id)).data) == 1  # nothing half-added
    finally:
        await proxy.stop()


async def test_concurrent_responses_in_one_conversation_on_one_worker_lose_no_items(proxy):
    client = agent(proxy)
    made = await client.conversations.create()
    await asyncio.gather(*(client.responses.create(model="m", input=f"q{i}", conversation=made.id, max_output_tokens=2)
                           for i in range(5)))
    items = (await client.conversations.items.list(made.id, limit=100)).data
    assert len(items) == 10 and {i.content[0].text for i in items if i.role == "user"} == {f"q{i}" for i in range(5)}


async def test_a_conversation_survives_a_worker_killed_with_minus_9(proxy_factory, stub, settings, tmp_path):
    procs, url = start_workers(settings, stub.url, tmp_path, count=1)
    try:
        await wait_ready(url, procs)
        killed = openai.AsyncOpenAI(base_url=url + "/v1", api_key="key-alpha", max_retries=0)
        made = await killed.conversations.create(items=[{"role": "user", "content": "one"}])
        await killed.responses.create(model="m", input="two", conversation=made.id, max_output_tokens=2)
    finally:
        os.kill(procs[0].pid, signal.SIGKILL)
        procs[0].wait(30)
    after = await proxy_factory([stub])
    texts = [i.content[0].text for i in (await agent(after).conversations.items.list(made.id, order="asc")).data]
    assert texts[:2] == ["one", "two"] and len(texts) == 3
    with pytest.raises(openai.NotFoundError):
        await agent(after, key="key-beta").conversations.retrieve(made.id)

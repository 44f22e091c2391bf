"""Conversations (the Conversations API's objects, and the `conversation` parameter of a Responses call), kept
on Kafka. Their routes are `stored_door.py`'s; here is what they and a call do to a conversation.

Why a topic of its own (`<p>.conversations`, compacted, keyed by conversation id) rather than the responses
topic under a key prefix: the API keeps conversations until they are deleted (no 30-day TTL), while stored
responses expire; a topic's retention is per topic, so the two lifetimes need two topics. The machinery is the
same (`TopicStore`: a follower of the topic in every worker, a bounded cache, reads that wait for the topic
to catch up), so any worker serves any conversation and a proxy restart loses none.

A conversation is one record, rewritten whole at each append (`StoredConversation`). A response made in it
sees its items (as chat messages, after the request's `instructions`) before its own input, joins the
conversation's session (a request naming another session gets a 400, as for `previous_response_id`), and
appends its input and output items once it is done. Appends to one conversation are serialised within a worker;
two workers appending to the same conversation at the same moment can lose one of the appends (the topic keeps
the last record), as the API itself does not promise concurrent use of one conversation either.

A team reads only its own conversations: another team's id is a 404, as an unknown or deleted one.
"""

from __future__ import annotations

import asyncio
import json
import uuid
import weakref

from seamlessflow.avro import RecordTooLarge
from seamlessflow.messages import StoredConversation, now_ms
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.items import conversation_of, input_items, input_messages
from seamlessflow.proxy.publisher import PublishFailed
from seamlessflow.proxy.requests import CallRequest
from seamlessflow.proxy.topic_store import NotCaughtUp, TopicStore


class Conversations:
    def __init__(self, store: TopicStore, run: str, max_record_bytes: int):
        self.store, self.run, self.max_record_bytes = store, run, max_record_bytes
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    # -- the Responses call path -----------------------------------------------------------------------
    async def continue_in(self, call: CallRequest, team: str) -> StoredConversation:
        """Puts the conversation's items (as chat messages) before the call's new input; returns the conversation
        (the session it belongs to). Refuses, before anything is generated, a call whose conversation could not
        be stored."""
        conversation_id = conversation_of(call.source)
        assert conversation_id is not None  # the caller checked
        found = await self.find(conversation_id, team)
        if found is None:
            raise ProxyError(404, f"Conversation with id '{conversation_id}' not found.", "conversation")
        items = json.loads(found.items_json)
        start = 1 if call.source.get("instructions") else 0
        messages = call.body["messages"]
        call.body["messages"] = [*messages[:start], *(input_messages(items) if items else []), *messages[start:]]
        # a lower bound of the record after this call: its items now, and the input as items (ids and content
        # parts: about twice the input's JSON); past the limit the append could never be written
        size = len(found.items_json) + 2 * len(json.dumps(call.source.get("input")))
        if size > self.max_record_bytes:
            raise ProxyError(400, f"the conversation would be over {size} bytes stored, past the "
                                  f"{self.max_record_bytes}-byte record limit (max_record_bytes): start another "
                                  "conversation", "conversation")
        return found

    async def append_response(self, call: CallRequest, team: str, session_id: str, response: dict) -> None:
        """Adds a finished response's input and output items to its conversation (a deleted one stays deleted)."""
        conversation_id = conversation_of(call.source)
        assert conversation_id is not None
        added = [*input_items(call.source.get("input"), response["id"]), *response["output"]]
        await self._append(conversation_id, team, added, session_id)

    # -- what the Conversations API does ---------------------------------------------------------------
    async def create(self, team: str, session_id: str | None, metadata: dict, items: list[dict]) -> StoredConversation:
        conversation_id = f"conv_{uuid.uuid4().hex}"
        stored = StoredConversation(
            event_id=conversation_id, conversation_id=conversation_id, team=team, run=self.run,
            session_id=session_id, metadata_json=json.dumps(metadata), items_json=json.dumps(items),
            created_at_ms=now_ms())
        await self._put(stored)
        return stored

    async def find(self, conversation_id: str, team: str) -> StoredConversation | None:
        try:
            stored = await self.store.get(conversation_id)
        except NotCaughtUp:
            raise ProxyError(503, "conversations are still being read from Kafka; retry", retry_after=1) from None
        return stored if stored is not None and stored.team == team else None

    async def delete(self, stored: StoredConversation) -> None:
        async with self._lock(stored.conversation_id):
            try:
                await self.store.delete(stored.conversation_id)
            except (TimeoutError, PublishFailed):
                raise ProxyError(503, "the conversation could not be deleted; retry", retry_after=1) from None

    async def add_items(self, stored: StoredConversation, items: list[dict]) -> None:
        await self._append(stored.conversation_id, stored.team, items, None)

    # -- the store -------------------------------------------------------------------------------------
    async def _append(self, conversation_id: str, team: str, added: list[dict], session_id: str | None) -> None:
        async with self._lock(conversation_id):
            current = await self.find(conversation_id, team)  # the newest, not the one the call started from
            if current is None:
                return  # deleted while the call ran: the API does not bring it back
            items = [*json.loads(current.items_json), *added]
            await self._put(StoredConversation(**{**current.__dict__, "items_json": json.dumps(items),
                                                  "session_id": current.session_id or session_id}))

    async def _put(self, stored: StoredConversation) -> None:
        try:
            await self.store.put(stored)
        except RecordTooLarge as exc:
            raise ProxyError(400, f"the conversation is too large to store ({exc}): nothing was added; start "
                                  "another conversation", "items") from None
        except (TimeoutError, PublishFailed):
            raise ProxyError(503, "the conversation could not be stored; retry", retry_after=1) from None

    def _lock(self, conversation_id: str) -> asyncio.Lock:
        lock = self._locks.get(conversation_id)
        if lock is None:
            lock = self._locks[conversation_id] = asyncio.Lock()
        return lock

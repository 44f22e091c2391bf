"""The Conversations API (`POST /v1/conversations`, `GET`/`DELETE /v1/conversations/{id}`, `GET`/`POST
/v1/conversations/{id}/items`) and the `conversation` parameter of a Responses call, kept on Kafka.

Why a topic of its own (`<p>.conversations`, compacted, keyed by conversation id) rather than the responses
topic under a key prefix: the API keeps conversations until they are deleted (no 30-day TTL), while stored
responses expire; a topic's retention is per topic, so the two lifetimes need two topics. The machinery is the
same (`ResponseStore`: a follower of the topic in every worker, a bounded cache, reads that wait for the topic
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
import re
import uuid
import weakref
from collections.abc import Callable
from typing import Any

from aiohttp import web

from seamlessflow.avro import RecordTooLarge
from seamlessflow.messages import StoredConversation, now_ms
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.items import input_items, page
from seamlessflow.proxy.openapi import SESSION_PATTERN
from seamlessflow.proxy.publisher import PublishFailed
from seamlessflow.proxy.requests import CallRequest
from seamlessflow.proxy.response_store import NotCaughtUp, ResponseStore
from seamlessflow.proxy.responses_api import conversation_of, input_messages

MAX_ITEMS = 20  # items a create or an items call may add at once, as the API allows
MAX_METADATA = 16


class Conversations:
    def __init__(self, store: ResponseStore, run: str, max_record_bytes: int, team_of: Callable[[web.Request], str]):
        self.store, self.run, self.max_record_bytes, self.team_of = store, run, max_record_bytes, team_of
        self._locks: weakref.WeakValueDictionary[str, asyncio.Lock] = weakref.WeakValueDictionary()

    def add_routes(self, app: web.Application, prefix: str) -> None:
        root = prefix + "/v1/conversations"
        app.router.add_post(root, self._create)
        app.router.add_get(root + "/{conversation_id}", self._get)
        app.router.add_delete(root + "/{conversation_id}", self._delete)
        app.router.add_get(root + "/{conversation_id}/items", self._list_items)
        app.router.add_post(root + "/{conversation_id}/items", self._add_items)

    # -- the Responses call path -----------------------------------------------------------------------
    async def continue_in(self, call: CallRequest, team: str, session_id: str, generated: bool) -> str:
        """Puts the conversation's items (as chat messages) before the call's new input; returns the session the
        call belongs to. Refuses, before anything is generated, a call whose conversation could not be stored."""
        conversation_id = conversation_of(call.source)
        assert conversation_id is not None  # the caller checked
        found = await self.find(conversation_id, team)
        if found is None:
            raise ProxyError(404, f"Conversation with id '{conversation_id}' not found.", "conversation")
        if found.session_id is not None:
            if not generated and session_id != found.session_id:
                raise ProxyError(400, f"conversation '{conversation_id}' belongs to another session than "
                                      f"'{session_id}'", "conversation")
            session_id = found.session_id
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
        return session_id

    async def append_response(self, call: CallRequest, team: str, session_id: str, response: dict) -> None:
        """Adds a finished response's input and output items to its conversation (a deleted one stays deleted)."""
        conversation_id = conversation_of(call.source)
        assert conversation_id is not None
        added = [*input_items(call.source.get("input"), response["id"]), *response["output"]]
        await self._append(conversation_id, team, added, session_id)

    # -- the routes ------------------------------------------------------------------------------------
    async def _create(self, request: web.Request) -> web.Response:
        team, session_id = self.team_of(request), _session_of(request)
        body = await _json_object(request)
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict) or len(metadata) > MAX_METADATA or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ProxyError(400, f"'metadata' must be an object of at most {MAX_METADATA} string values",
                             "metadata")
        conversation_id = f"conv_{uuid.uuid4().hex}"
        items = _new_items(body.get("items"), "items", required=False)
        stored = StoredConversation(
            event_id=conversation_id, conversation_id=conversation_id, team=team, run=self.run,
            session_id=session_id, metadata_json=json.dumps(metadata), items_json=json.dumps(items),
            created_at_ms=now_ms())
        await self._put(stored)
        return web.json_response(_object(stored))

    async def _get(self, request: web.Request) -> web.Response:
        return web.json_response(_object(await self._stored(request)))

    async def _delete(self, request: web.Request) -> web.Response:
        stored = await self._stored(request)
        async with self._lock(stored.conversation_id):
            try:
                await self.store.delete(stored.conversation_id)
            except (TimeoutError, PublishFailed):
                raise ProxyError(503, "the conversation could not be deleted; retry", retry_after=1) from None
        return web.json_response({"id": stored.conversation_id, "object": "conversation.deleted", "deleted": True})

    async def _list_items(self, request: web.Request) -> web.Response:
        stored = await self._stored(request)
        return web.json_response(page(json.loads(stored.items_json), request.query))

    async def _add_items(self, request: web.Request) -> web.Response:
        stored = await self._stored(request)
        items = _new_items((await _json_object(request)).get("items"), "items", required=True)
        await self._append(stored.conversation_id, stored.team, items, None)
        return web.json_response({"object": "list", "data": items, "first_id": items[0]["id"],
                                  "last_id": items[-1]["id"], "has_more": False})

    # -- the store -------------------------------------------------------------------------------------
    async def find(self, conversation_id: str, team: str) -> StoredConversation | None:
        try:
            stored = await self.store.get(conversation_id)
        except NotCaughtUp:
            raise ProxyError(503, "conversations are still being read from Kafka; retry", retry_after=1) from None
        return stored if stored is not None and stored.team == team else None

    async def _stored(self, request: web.Request) -> StoredConversation:
        team = self.team_of(request)
        _session_of(request)  # a bad session id in the path is a 400, before anything is looked up
        conversation_id = request.match_info["conversation_id"]
        stored = await self.find(conversation_id, team)
        if stored is None:
            raise ProxyError(404, f"Conversation with id '{conversation_id}' not found.", "conversation_id")
        return stored

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


def _object(stored: StoredConversation) -> dict:
    return {"id": stored.conversation_id, "object": "conversation", "created_at": stored.created_at_ms // 1000,
            "metadata": json.loads(stored.metadata_json)}


def _session_of(request: web.Request) -> str | None:
    session_id = request.match_info.get("session_id")
    if session_id is not None and not re.fullmatch(SESSION_PATTERN, session_id):
        raise ProxyError(400, "session id must be 1-128 characters from [A-Za-z0-9._:-]", "session_id")
    return session_id


async def _json_object(request: web.Request) -> dict:
    try:
        body = await request.json() if request.can_read_body else {}
    except ValueError:
        raise ProxyError(400, "the request body must be JSON") from None
    if not isinstance(body, dict):
        raise ProxyError(400, "the request body must be a JSON object")
    return body


def _new_items(value: Any, field: str, required: bool) -> list[dict]:
    """Items a client adds, checked as a Responses input is (each must have a chat form), with fresh ids."""
    if not required and (value is None or value == []):
        return []
    if not isinstance(value, list) or not value or len(value) > MAX_ITEMS:
        raise ProxyError(400, f"'{field}' must be a list of 1 to {MAX_ITEMS} items", field)
    try:
        input_messages(value)
    except ProxyError as exc:
        raise ProxyError(400, exc.message.replace("'input'", f"'{field}'"), field) from None
    return input_items([{k: v for k, v in item.items() if k != "id"} for item in value], uuid.uuid4().hex)

"""The door to what the Responses and Conversations APIs keep: `GET`/`DELETE /v1/responses/{id}`, `GET
/v1/responses/{id}/input_items`, and the Conversations API (`POST /v1/conversations`, `GET`/`DELETE
/v1/conversations/{id}`, `GET`/`POST /v1/conversations/{id}/items`). Parse and render only: the team and the
session id pass the gatekeeper, the records are the state's (`state.py`, `conversations.py`).
"""

from __future__ import annotations

import json
import uuid
from typing import Any

from aiohttp import web

from seamlessflow.messages import StoredConversation, StoredResponse
from seamlessflow.proxy.conversations import Conversations
from seamlessflow.proxy.doors import BEARER_HEADER, bearer_key
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.gatekeeper import Gatekeeper
from seamlessflow.proxy.items import input_items, input_messages, page
from seamlessflow.proxy.state import ResponseState

MAX_ITEMS = 20  # items a create or an items call may add at once, as the API allows
MAX_METADATA = 16


class StoredDoor:
    def __init__(self, gatekeeper: Gatekeeper, state: ResponseState, conversations: Conversations):
        self.gatekeeper, self.state, self.conversations = gatekeeper, state, conversations

    def add_routes(self, app: web.Application, prefix: str) -> None:
        path = prefix + "/v1/responses/{response_id}"
        app.router.add_get(path, self._get)
        app.router.add_delete(path, self._delete)
        app.router.add_get(path + "/input_items", self._input_items)
        root = prefix + "/v1/conversations"
        app.router.add_post(root, self._create_conversation)
        app.router.add_get(root + "/{conversation_id}", self._get_conversation)
        app.router.add_delete(root + "/{conversation_id}", self._delete_conversation)
        app.router.add_get(root + "/{conversation_id}/items", self._list_items)
        app.router.add_post(root + "/{conversation_id}/items", self._add_items)

    def _team_and_session(self, request: web.Request) -> tuple[str, str | None]:
        """The caller's team, and the session id in the path, checked (a bad one is a 400 before any lookup)."""
        team = self.gatekeeper.team(bearer_key(request), BEARER_HEADER)
        return team, self.gatekeeper.session_named(request.match_info.get("session_id"))

    # -- stored responses ------------------------------------------------------------------------------
    async def _stored(self, request: web.Request) -> StoredResponse:
        team, _ = self._team_and_session(request)
        response_id = request.match_info["response_id"]
        stored = await self.state.find(response_id, team)
        if stored is None:
            raise ProxyError(404, f"Response with id '{response_id}' not found.", "response_id")
        return stored

    async def _get(self, request: web.Request) -> web.Response:
        stored = await self._stored(request)
        if request.query.get("stream") in ("true", "1"):
            raise ProxyError(400, "streaming a stored response again is not supported by the proxy", "stream")
        return web.Response(text=stored.response_json, content_type="application/json")

    async def _input_items(self, request: web.Request) -> web.Response:
        stored = await self._stored(request)
        return web.json_response(page(json.loads(stored.input_items_json), request.query))

    async def _delete(self, request: web.Request) -> web.Response:
        stored = await self._stored(request)
        await self.state.delete(stored)
        return web.json_response({"id": stored.response_id, "object": "response", "deleted": True})

    # -- conversations ---------------------------------------------------------------------------------
    async def _conversation(self, request: web.Request) -> StoredConversation:
        team, _ = self._team_and_session(request)
        conversation_id = request.match_info["conversation_id"]
        stored = await self.conversations.find(conversation_id, team)
        if stored is None:
            raise ProxyError(404, f"Conversation with id '{conversation_id}' not found.", "conversation_id")
        return stored

    async def _create_conversation(self, request: web.Request) -> web.Response:
        team, session_id = self._team_and_session(request)
        body = await _json_object(request)
        metadata = body.get("metadata") or {}
        if not isinstance(metadata, dict) or len(metadata) > MAX_METADATA or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise ProxyError(400, f"'metadata' must be an object of at most {MAX_METADATA} string values",
                             "metadata")
        items = _new_items(body.get("items"), "items", required=False)
        return web.json_response(_object(await self.conversations.create(team, session_id, metadata, items)))

    async def _get_conversation(self, request: web.Request) -> web.Response:
        return web.json_response(_object(await self._conversation(request)))

    async def _delete_conversation(self, request: web.Request) -> web.Response:
        stored = await self._conversation(request)
        await self.conversations.delete(stored)
        return web.json_response({"id": stored.conversation_id, "object": "conversation.deleted", "deleted": True})

    async def _list_items(self, request: web.Request) -> web.Response:
        stored = await self._conversation(request)
        return web.json_response(page(json.loads(stored.items_json), request.query))

    async def _add_items(self, request: web.Request) -> web.Response:
        stored = await self._conversation(request)
        items = _new_items((await _json_object(request)).get("items"), "items", required=True)
        await self.conversations.add_items(stored, items)
        return web.json_response({"object": "list", "data": items, "first_id": items[0]["id"],
                                  "last_id": items[-1]["id"], "has_more": False})


def _object(stored: StoredConversation) -> dict:
    return {"id": stored.conversation_id, "object": "conversation", "created_at": stored.created_at_ms // 1000,
            "metadata": json.loads(stored.metadata_json)}


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

"""Response state for the Responses door: `store`, `previous_response_id`, and `GET`/`DELETE /v1/responses/{id}`
and `GET /v1/responses/{id}/input_items`, kept on Kafka (`response_store.py`), so any proxy worker serves any of
them and a proxy restart loses none.

A team reads only its own stored responses: another team's id is a 404, the same answer as an unknown, deleted
or expired one (`proxy.stored_retention_s`), so an id tells nothing about other teams. A continuation belongs to
the stored response's session (a request that names another session gets a 400).

What is exact, and what is not. Every call's recorded tokens are exactly the engine's own prompt and completion
ids, as for every front door. A continuation's prompt is the stored conversation (as chat messages, its output
last) plus the new input, rendered by the engine's chat template in the same session, so the session's prefix
tree extends exactly as a Chat Completions agent's does when it re-sends its history: where the template renders
the stored output to the ids the model generated (the tiny models' template for text and pythonic tool calls),
the continuation's prompt starts with the previous call's prompt and completion, a clean extension; where it does
not (the text re-tokenises differently, a tool call the model wrote in another format than the template renders,
`instructions` changed between calls), the assembler sees a fork there, never a wrong merge. The proxy does not
splice stored token ids into the prompt itself: the engine's chat endpoint (its tool-call parser and template)
takes messages, not ids. Each token keeps the policy version that generated it (on the session-events topic and
in the stored record).

The `conversation` parameter and the Conversations API are `conversations.py`, on a topic of their own; a call
names either a previous response or a conversation, never both (the API's rule).
"""

from __future__ import annotations

import contextlib
import json
import re
import time
from collections.abc import Callable

import orjson
from aiohttp import web

from seamlessflow.avro import RecordTooLarge
from seamlessflow.messages import StoredConversation, StoredResponse, now_ms
from seamlessflow.proxy.capture import CallCapture, ChoiceCapture
from seamlessflow.proxy.conversations import Conversations
from seamlessflow.proxy.doors import EventShape
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.items import input_items, page
from seamlessflow.proxy.openapi import SESSION_PATTERN
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.publisher import PublishFailed
from seamlessflow.proxy.recording import CallIdentity
from seamlessflow.proxy.requests import CallRequest
from seamlessflow.proxy.response_store import NotCaughtUp, ResponseStore
from seamlessflow.proxy.responses_api import ResponseEvents, conversation_of, input_messages, stores
from seamlessflow.topics import Topics


class Recent:
    """A Responses WebSocket's last response, kept in memory for its connection's next `previous_response_id`
    whether it was stored or not (the API's WebSocket mode continues `store: false` responses so)."""

    def __init__(self) -> None:
        self.last: StoredResponse | None = None

    def get(self, response_id: str) -> StoredResponse | None:
        return self.last if self.last is not None and self.last.response_id == response_id else None

    def remember(self, record: StoredResponse) -> None:
        self.last = record


class StoredResponses:
    def __init__(self, store: ResponseStore, options: ProxyOptions, run: str, max_record_bytes: int,
                 team_of: Callable[[web.Request], str]):
        self.store, self.options, self.run = store, options, run
        self.max_record_bytes, self.team_of = max_record_bytes, team_of
        kept = ResponseStore(store.settings, store.codec, store.publisher, Topics(store.settings).conversations,
                             store.cache.budget_bytes, store.wait_s, store.delivery_timeout_s,
                             kind=StoredConversation, key="conversation_id")
        self.conversations = Conversations(kept, run, max_record_bytes, team_of)

    def start(self) -> None:
        """Follows the responses and conversations topics (what any worker stored)."""
        self.store.start()
        self.conversations.store.start()

    def stop(self) -> None:
        self.store.stop()
        self.conversations.store.stop()

    def add_routes(self, app: web.Application, prefix: str) -> None:
        self.conversations.add_routes(app, prefix)
        path = prefix + "/v1/responses/{response_id}"
        app.router.add_get(path, self._get)
        app.router.add_delete(path, self._delete)
        app.router.add_get(path + "/input_items", self._input_items)

    # -- the call path ---------------------------------------------------------------------------------
    async def continue_from(self, call: CallRequest, team: str, session_id: str, generated: bool,
                            recent: Recent | None = None) -> str:
        """Puts the stored conversation before a continuation's new input (after its instructions); returns the
        session the call belongs to. Refuses, before anything is generated, a request whose stored response
        could not fit in a record. On a WebSocket, `recent` is its connection's last response, stored or not."""
        if conversation_of(call.source) is not None:
            return await self.conversations.continue_in(call, team, session_id, generated)
        previous_id = call.source.get("previous_response_id")
        previous = None
        if previous_id is not None:
            previous = recent.get(previous_id) if recent else None
            previous = previous or await self.find(previous_id, team)
            if previous is None:
                raise ProxyError(400, f"Previous response with id '{previous_id}' not found.", "previous_response_id")
            if not generated and session_id != previous.session_id:
                raise ProxyError(400, f"previous response '{previous_id}' belongs to another session than "
                                      f"'{session_id}'", "previous_response_id")
            start = 1 if call.source.get("instructions") else 0
            messages = call.body["messages"]
            call.body["messages"] = [*messages[:start], *json.loads(previous.messages_json), *messages[start:]]
            session_id = previous.session_id
        if stores(call.source):
            self._check_size(call, previous)
        return session_id

    async def keep(self, call: CallRequest, who: CallIdentity, capture: CallCapture, response: dict,
                   recent: Recent | None = None) -> None:
        """Stores a finished Responses call (unless `store: false`), and adds it to its conversation, before the
        client gets its answer; on a WebSocket its connection remembers it too, stored or not (`recent`)."""
        if not call.source:
            return
        if conversation_of(call.source) is not None:
            await self.conversations.append_response(call, who.team, who.session_id, response)
        if not stores(call.source) and recent is None:
            return
        stored = await self.record(call, who, capture.choices[0], response, recent)
        if recent is not None:
            recent.remember(stored)
        if not stores(call.source):
            return
        try:
            await self.store.put(stored)
        except RecordTooLarge as exc:
            raise ProxyError(400, f"the response is too large to store ({exc}): nothing was stored; send "
                                  "store: false, or a shorter conversation", "store") from None
        except (TimeoutError, PublishFailed):
            raise ProxyError(503, "the response could not be stored; retry", retry_after=1) from None

    async def record(self, call: CallRequest, who: CallIdentity, choice: ChoiceCapture | None, response: dict,
                     recent: Recent | None = None) -> StoredResponse:
        """A Responses call's record: its conversation (output included) and its tokens (none for a warmup)."""
        start = 1 if call.source.get("instructions") else 0
        said = input_messages(response["output"]) if response["output"] else []
        return StoredResponse(
            event_id=response["id"], response_id=response["id"], session_id=who.session_id, team=who.team,
            run=self.run, previous_response_id=call.source.get("previous_response_id"),
            input_items_json=json.dumps(await self._items_so_far(call, response["id"], recent)),
            response_json=orjson.dumps(response).decode(),
            messages_json=json.dumps([*call.body["messages"][start:], *said]),
            prompt_ids=choice.prompt_ids if choice else [], completion_ids=choice.completion_ids if choice else [],
            versions=choice.versions if choice else [], created_at_ms=now_ms(),
        )

    async def _items_so_far(self, call: CallRequest, response_id: str, recent: Recent | None = None) -> list[dict]:
        """The conversation's items as `input_items` lists them (as the API does for a continuation): the
        previous response's input items and output, then this request's input."""
        items = input_items(call.source.get("input"), response_id)
        previous_id = call.source.get("previous_response_id")
        if not previous_id:
            return items
        previous = recent.get(previous_id) if recent else None
        previous = previous or self.store.cache.get(previous_id)  # just read by continue_from: cached
        if previous is None:
            with contextlib.suppress(NotCaughtUp):
                previous = await self.store.get(previous_id)
        if previous is None:
            return items
        return [*json.loads(previous.input_items_json), *json.loads(previous.response_json)["output"], *items]

    async def keep_streamed(self, call: CallRequest, who: CallIdentity, capture: CallCapture, events: EventShape,
                            tail: bytes, recent: Recent | None = None) -> bytes:
        """The stream's last events: `tail` once the response is stored, else an error event in its place."""
        if not isinstance(events, ResponseEvents) or events.response is None:
            return tail
        try:
            await self.keep(call, who, capture, events.response, recent)
        except ProxyError as exc:
            return events.fail(exc.status, exc.body())
        return tail

    async def find(self, response_id: str, team: str) -> StoredResponse | None:
        """The team's stored response, if it is there and not past the team's retention."""
        try:
            stored = await self.store.get(response_id)
        except NotCaughtUp:
            raise ProxyError(503, "stored responses are still being read from Kafka; retry", retry_after=1) from None
        if stored is None or stored.team != team:
            return None
        keep_s = self.options.stored_retention_by_team.get(team, self.options.stored_retention_s)
        return stored if time.time() * 1000 - stored.created_at_ms <= keep_s * 1000 else None

    def _check_size(self, call: CallRequest, previous: StoredResponse | None) -> None:
        """A lower bound of the record's size (its conversation and its input items, each holding the input,
        and the ids it carries over): past the limit the record could never be written, so the call is refused
        before it runs."""
        ids = 4 * (len(previous.prompt_ids) + len(previous.completion_ids)) if previous else 0
        start = 1 if call.source.get("instructions") else 0
        size = len(json.dumps(call.body["messages"][start:])) + len(json.dumps(call.source.get("input"))) + ids
        if size > self.max_record_bytes:
            raise ProxyError(400, f"the response would be over {size} bytes stored, past the "
                                  f"{self.max_record_bytes}-byte record limit (max_record_bytes): send store: false, "
                                  "or a shorter conversation", "store")

    # -- the routes ------------------------------------------------------------------------------------
    async def _stored(self, request: web.Request) -> StoredResponse:
        team = self.team_of(request)
        session_id = request.match_info.get("session_id")
        if session_id is not None and not re.fullmatch(SESSION_PATTERN, session_id):
            raise ProxyError(400, "session id must be 1-128 characters from [A-Za-z0-9._:-]", "session_id")
        response_id = request.match_info["response_id"]
        stored = await self.find(response_id, team)
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
        try:
            await self.store.delete(stored.response_id)
        except (TimeoutError, PublishFailed):
            raise ProxyError(503, "the response could not be deleted; retry", retry_after=1) from None
        return web.json_response({"id": stored.response_id, "object": "response", "deleted": True})

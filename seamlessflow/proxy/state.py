"""The state a Responses call continues and leaves: `previous_response_id`, `conversation` and `store`, kept on
Kafka (`topic_store.py`), so any proxy worker serves any of it and a proxy restart loses none. The routes that
read it (`GET`/`DELETE /v1/responses/{id}`, `input_items`, the Conversations API) are a door of their own
(`stored_door.py`).

On its way down, a call that names a previous response gets the stored conversation before its new input (after
its instructions), and the gatekeeper puts it in the stored response's session (a request that names another
session gets a 400). On its way back, once its tokens are recorded, the response is stored (unless `store: false`)
and added to its conversation before the client gets its answer.

A team reads only its own stored responses: another team's id is a 404, the same answer as an unknown, deleted
or expired one (`proxy.stored_retention_s`), so an id tells nothing about other teams.

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

The `conversation` parameter is `conversations.py`, on a topic of its own; a call names either a previous
response or a conversation, never both (the API's rule).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass

import orjson

from seamlessflow.avro import RecordTooLarge
from seamlessflow.messages import StoredResponse, now_ms
from seamlessflow.proxy.calls import Call, CallIdentity
from seamlessflow.proxy.conversations import Conversations
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.generation import Generation
from seamlessflow.proxy.items import conversation_of, input_items, input_messages, stores
from seamlessflow.proxy.options import ProxyOptions
from seamlessflow.proxy.publisher import PublishFailed
from seamlessflow.proxy.topic_store import NotCaughtUp, TopicStore


@dataclass(frozen=True)
class Continued:
    """What a call continues, as the gatekeeper settles its session by it."""

    session_id: str | None  # the session it belongs to (None: a conversation made outside any session)
    named: str  # how the request names it, for a refusal: "previous response 'resp_...'"
    param: str  # the request's field that names it


class ResponseState:
    def __init__(self, responses: TopicStore, conversations: Conversations, options: ProxyOptions, run: str,
                 max_record_bytes: int, generation: Generation):
        self.responses, self.conversations, self.options, self.run = responses, conversations, options, run
        self.max_record_bytes, self.generation = max_record_bytes, generation

    def start(self) -> None:
        """Follows the responses and conversations topics (what any worker stored)."""
        self.responses.start()
        self.conversations.store.start()

    def stop(self) -> None:
        self.responses.stop()
        self.conversations.store.stop()

    # -- a call, on its way down and back --------------------------------------------------------------
    async def continue_call(self, call: Call) -> Continued | None:
        """Puts the stored conversation before a continuation's new input (after its instructions); returns what
        it continues, if anything. Refuses, before anything is generated, a request whose stored response could
        not fit in a record. On a WebSocket, `call.recent` is its connection's last response, stored or not."""
        request = call.request
        source = request.source
        if not source:
            return None  # not a Responses call
        if (conversation_id := conversation_of(source)) is not None:
            found = await self.conversations.continue_in(request, call.team)
            return Continued(found.session_id, f"conversation '{conversation_id}'", "conversation")
        previous_id = source.get("previous_response_id")
        previous = None
        if previous_id is not None:
            previous = call.recent.get(previous_id) if call.recent else None
            previous = previous or await self.find(previous_id, call.team)
            if previous is None:
                raise ProxyError(400, f"Previous response with id '{previous_id}' not found.", "previous_response_id")
            start = 1 if source.get("instructions") else 0
            messages = request.body["messages"]
            request.body["messages"] = [*messages[:start], *json.loads(previous.messages_json), *messages[start:]]
            call.previous = previous
        if stores(source):
            self._check_size(call, previous)
        if previous is None:
            return None
        return Continued(previous.session_id, f"previous response '{previous_id}'", "previous_response_id")

    async def serve(self, call: Call) -> None:
        """Generation (and its recording), then the response kept."""
        await self.generation.serve(call)
        await self.keep(call)

    async def keep(self, call: Call) -> None:
        """Stores a finished Responses call (unless `store: false`), and adds it to its conversation, before the
        client gets its answer; on a WebSocket its connection remembers it too, stored or not (`call.recent`)."""
        source, who, capture = call.request.source, call.who, call.capture
        if not source:
            return
        response = call.reply.finish()
        if response is None:
            return
        assert who is not None and capture is not None  # settled above, generated below
        if conversation_of(source) is not None:
            await self.conversations.append_response(call.request, who.team, who.session_id, response)
        if not stores(source) and call.recent is None:
            return
        stored = self.record(call, who, response)
        if call.recent is not None:
            call.recent.remember(stored)
        if not stores(source):
            return
        try:
            await self.responses.put(stored)
        except RecordTooLarge as exc:
            raise ProxyError(400, f"the response is too large to store ({exc}): nothing was stored; send "
                                  "store: false, or a shorter conversation", "store") from None
        except (TimeoutError, PublishFailed):
            raise ProxyError(503, "the response could not be stored; retry", retry_after=1) from None

    def record(self, call: Call, who: CallIdentity, response: dict) -> StoredResponse:
        """A Responses call's record: its conversation (output included) and its tokens (none for a warmup)."""
        request = call.request
        source = request.source
        start = 1 if source.get("instructions") else 0
        said = input_messages(response["output"]) if response["output"] else []
        choice = call.capture.choices[0] if call.capture else None
        return StoredResponse(
            event_id=response["id"], response_id=response["id"], session_id=who.session_id, team=who.team,
            run=self.run, previous_response_id=source.get("previous_response_id"),
            input_items_json=json.dumps(self._items_so_far(call, response["id"])),
            response_json=orjson.dumps(response).decode(),
            messages_json=json.dumps([*request.body["messages"][start:], *said]),
            prompt_ids=choice.prompt_ids if choice else [], completion_ids=choice.completion_ids if choice else [],
            versions=choice.versions if choice else [], created_at_ms=now_ms(),
        )

    @staticmethod
    def _items_so_far(call: Call, response_id: str) -> list[dict]:
        """The conversation's items as `input_items` lists them (as the API does for a continuation): the
        previous response's input items and output, then this request's input."""
        items = input_items(call.request.source.get("input"), response_id)
        previous = call.previous
        if previous is None:
            return items
        return [*json.loads(previous.input_items_json), *json.loads(previous.response_json)["output"], *items]

    def _check_size(self, call: Call, previous: StoredResponse | None) -> None:
        """A lower bound of the record's size (its conversation and its input items, each holding the input,
        and the ids it carries over): past the limit the record could never be written, so the call is refused
        before it runs."""
        ids = 4 * (len(previous.prompt_ids) + len(previous.completion_ids)) if previous else 0
        source = call.request.source
        start = 1 if source.get("instructions") else 0
        size = len(json.dumps(call.request.body["messages"][start:])) + len(json.dumps(source.get("input"))) + ids
        if size > self.max_record_bytes:
            raise ProxyError(400, f"the response would be over {size} bytes stored, past the "
                                  f"{self.max_record_bytes}-byte record limit (max_record_bytes): send store: false, "
                                  "or a shorter conversation", "store")

    # -- what the stored door reads --------------------------------------------------------------------
    async def find(self, response_id: str, team: str) -> StoredResponse | None:
        """The team's stored response, if it is there and not past the team's retention."""
        try:
            stored = await self.responses.get(response_id)
        except NotCaughtUp:
            raise ProxyError(503, "stored responses are still being read from Kafka; retry", retry_after=1) from None
        if stored is None or stored.team != team:
            return None
        keep_s = self.options.stored_retention_by_team.get(team, self.options.stored_retention_s)
        return stored if time.time() * 1000 - stored.created_at_ms <= keep_s * 1000 else None

    async def delete(self, stored: StoredResponse) -> None:
        try:
            await self.responses.delete(stored.response_id)
        except (TimeoutError, PublishFailed):
            raise ProxyError(503, "the response could not be deleted; retry", retry_after=1) from None

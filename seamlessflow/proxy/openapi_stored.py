"""The stored-response and conversation routes in the proxy's OpenAPI document (`openapi.py` assembles it):
`GET` and `DELETE /v1/responses/{response_id}`, `GET /v1/responses/{response_id}/input_items`, and the
Conversations API's create, read, delete and items, with the API's own shapes, so the fuzzer
(tests/proxy/test_fuzz.py) drives them like every other route."""

from __future__ import annotations

from typing import Any

ERRORS = {
    "400": "a bad query parameter or session id",
    "401": "missing or unknown API key",
    "404": "no stored response of this team with this id (never stored, deleted, expired, or another team's)",
    "405": "method not allowed on this route",
    "413": "request body too large",
    "503": "the responses topic could not be read or written in time; retry",
}
RESPONSE_ID = {"name": "response_id", "in": "path", "required": True, "schema": {"type": "string", "minLength": 1},
               "description": "the `id` of a response made with `store` true (the default)"}
LIST_PARAMS = [
    {"name": "limit", "in": "query", "required": False, "schema": {"type": "integer", "minimum": 1, "maximum": 100}},
    {"name": "order", "in": "query", "required": False, "schema": {"enum": ["asc", "desc"]}},
    {"name": "after", "in": "query", "required": False, "schema": {"type": "string"},
     "description": "an item id: the page starts after it"},
]
ITEM_LIST = {"type": "object", "required": ["object", "data", "has_more"],
             "properties": {"object": {"const": "list"}, "data": {"type": "array", "items": {"type": "object"}},
                            "first_id": {"type": ["string", "null"]}, "last_id": {"type": ["string", "null"]},
                            "has_more": {"type": "boolean"}}}
DELETED = {"type": "object", "required": ["id", "object", "deleted"],
           "properties": {"id": {"type": "string"}, "object": {"const": "response"}, "deleted": {"const": True}}}
RESPONSE = {"type": "object", "required": ["id", "object", "output"],
            "properties": {"object": {"const": "response"}, "store": {"const": True}}}


def _answers(description: str, schema: dict, errors: list[str]) -> dict:
    out: dict[str, Any] = {"200": {"description": description, "content": {"application/json": {"schema": schema}}}}
    for status in errors:
        out[status] = {"description": ERRORS[status],
                       "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}}
    return out


def stored_paths(prefix: str, session_param: dict | None) -> dict[str, Any]:
    """The three operations under `prefix` ("" or "/sessions/{session_id}", whose parameter is `session_param`)."""
    where = [session_param] if session_param else []
    suffix = "_in_session" if session_param else ""
    errors = ["400", "401", "404", "405", "503"]
    path = prefix + "/v1/responses/{response_id}"
    return {
        path: {
            "get": {"operationId": f"get_response{suffix}", "summary": "a stored response, as it was answered",
                    "parameters": [*where, RESPONSE_ID],
                    "responses": _answers("the Response object", RESPONSE, errors)},
            "delete": {"operationId": f"delete_response{suffix}",
                       "summary": "deletes a stored response (a tombstone on the responses topic)",
                       "parameters": [*where, RESPONSE_ID],
                       "responses": _answers("deleted", DELETED, errors)},
        },
        path + "/input_items": {
            "get": {"operationId": f"response_input_items{suffix}", "summary": "a stored response's input items",
                    "parameters": [*where, RESPONSE_ID, *LIST_PARAMS],
                    "responses": _answers("a page of input items", ITEM_LIST, ["400", "401", "404", "405", "503"])},
        },
    }


CONVERSATION_PARAM = {
    "oneOf": [{"type": "string", "minLength": 1},
              {"type": "object", "required": ["id"], "properties": {"id": {"type": "string", "minLength": 1}}},
              {"type": "null"}],
    "description": "a conversation of this team (`POST /v1/conversations`): its items come before this input, and "
                   "this response's input and output are added to it; not with previous_response_id",
}
CONVERSATION_ID = {"name": "conversation_id", "in": "path", "required": True,
                   "schema": {"type": "string", "minLength": 1}, "description": "the `id` of a conversation"}
CONVERSATION = {"type": "object", "required": ["id", "object", "created_at", "metadata"],
                "properties": {"id": {"type": "string"}, "object": {"const": "conversation"},
                               "created_at": {"type": "integer"}, "metadata": {"type": "object"}}}
CONVERSATION_DELETED = {"type": "object", "required": ["id", "object", "deleted"],
                        "properties": {"id": {"type": "string"}, "object": {"const": "conversation.deleted"},
                                       "deleted": {"const": True}}}
NEW_ITEMS = {"type": "array", "maxItems": 20, "items": {"type": "object"},
             "description": "message, function_call and function_call_output items; text content only"}
CREATE_BODY = {"type": "object", "additionalProperties": True, "properties": {
    "items": {"oneOf": [NEW_ITEMS, {"type": "null"}]},
    "metadata": {"oneOf": [{"type": "object", "maxProperties": 16, "additionalProperties": {"type": "string"}},
                           {"type": "null"}]},
}}
ITEMS_BODY = {"type": "object", "required": ["items"], "additionalProperties": True,
              "properties": {"items": {**NEW_ITEMS, "minItems": 1}}}


def _body(schema: dict, required: bool) -> dict:
    return {"required": required, "content": {"application/json": {"schema": schema}}}


def conversation_paths(prefix: str, session_param: dict | None) -> dict[str, Any]:
    """The Conversations API's operations under `prefix`, as `stored_paths`."""
    where = [session_param] if session_param else []
    suffix = "_in_session" if session_param else ""
    root = prefix + "/v1/conversations"
    errors, posted = ["400", "401", "404", "405", "503"], ["400", "401", "404", "405", "413", "503"]
    return {
        root: {"post": {"operationId": f"create_conversation{suffix}",
                        "summary": "a conversation (kept on the conversations topic), with its first items",
                        "parameters": where, "requestBody": _body(CREATE_BODY, False),
                        "responses": _answers("the Conversation object", CONVERSATION,
                                              ["400", "401", "405", "413", "503"])}},
        root + "/{conversation_id}": {
            "get": {"operationId": f"get_conversation{suffix}", "summary": "a conversation",
                    "parameters": [*where, CONVERSATION_ID],
                    "responses": _answers("the Conversation object", CONVERSATION, errors)},
            "delete": {"operationId": f"delete_conversation{suffix}",
                       "summary": "deletes a conversation (a tombstone on the conversations topic)",
                       "parameters": [*where, CONVERSATION_ID],
                       "responses": _answers("deleted", CONVERSATION_DELETED, errors)},
        },
        root + "/{conversation_id}/items": {
            "get": {"operationId": f"conversation_items{suffix}", "summary": "a page of a conversation's items",
                    "parameters": [*where, CONVERSATION_ID, *LIST_PARAMS],
                    "responses": _answers("a page of items", ITEM_LIST, errors)},
            "post": {"operationId": f"add_conversation_items{suffix}", "summary": "adds items to a conversation",
                     "parameters": [*where, CONVERSATION_ID], "requestBody": _body(ITEMS_BODY, True),
                     "responses": _answers("the items added", ITEM_LIST, posted)},
        },
    }


COMPACT_BODY = {
    "type": "object", "additionalProperties": True, "required": ["model"],
    "properties": {
        "model": {"type": "string"},
        "input": {"oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "object"}}, {"type": "null"}],
                  "description": "the conversation to compact (message, function_call, function_call_output and "
                                 "compaction items); this or previous_response_id"},
        "instructions": {"type": ["string", "null"]},
        "previous_response_id": {"type": ["string", "null"], "minLength": 1},
        "max_output_tokens": {"type": "integer", "minimum": 1, "maximum": 2**31 - 1,
                              "description": "the summary's length (an extension: the API has none)"},
    },
}
COMPACTED = {"type": "object", "required": ["id", "object", "output", "usage"],
             "properties": {"object": {"const": "response.compaction"}, "output": {"type": "array"}}}


def compact_operation(door_operation: dict, in_path: bool) -> dict:
    """`POST /v1/responses/compact`: the Responses door's operation (its parameters and errors) with its own body
    and answer (JSON only: it does not stream)."""
    post = dict(door_operation["post"])
    responses = dict(post["responses"])
    responses["200"] = {"description": "every user message, then one compaction item",
                        "content": {"application/json": {"schema": COMPACTED}}}
    post.update(operationId=f"compact_response{'_in_session' if in_path else ''}", responses=responses,
                summary="the conversation summarised by the policy (a recorded call) into a compaction item",
                requestBody=_body(COMPACT_BODY, True))
    return {"post": post}


def socket_operation(session_param: dict | None) -> dict[str, Any]:
    """`GET /v1/responses`: the Responses API's WebSocket mode (`socket_door.py`), as a `get` to merge in."""
    return {"get": {
        "operationId": f"responses_websocket{'_in_session' if session_param else ''}",
        "summary": "a WebSocket: `response.create` events in, each answered with the streamed POST's events",
        "parameters": [session_param] if session_param else [],
        "responses": {"101": {"description": "upgraded to a WebSocket"},
                      **{code: {"description": why} for code, why in (
                          ("400", "not a WebSocket upgrade, or a bad session id"),
                          ("401", "missing or unknown team key"))}},
    }}

"""The stored-response routes in the proxy's OpenAPI document (`openapi.py` assembles it): `GET` and `DELETE
/v1/responses/{response_id}` and `GET /v1/responses/{response_id}/input_items`, with the API's own shapes, so the
fuzzer (tests/proxy/test_fuzz.py) drives them like every other route."""

from __future__ import annotations

from typing import Any

ERRORS = {
    "400": "a bad query parameter or session id",
    "401": "missing or unknown API key",
    "404": "no stored response of this team with this id (never stored, deleted, expired, or another team's)",
    "405": "method not allowed on this route",
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

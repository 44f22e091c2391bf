"""The proxy's OpenAPI document, served at `GET /openapi.json`.

Why it is written out by hand as data: it states what the proxy itself checks (400 on a violation) and
nothing more; every other body field passes through to the engine, which validates it (hence
`additionalProperties: true` on the call bodies). A fuzzer drives every operation from this document
(tests/proxy/test_fuzz.py), and a test keeps its paths equal to the routes the app registers.
The limits that depend on the configuration (`max_n`, `max_body_bytes`) are filled in from it.
"""

from __future__ import annotations

from typing import Any

from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.proxy.openapi_stored import (
    CONVERSATION_PARAM,
    compact_operation,
    conversation_paths,
    socket_operation,
    stored_paths,
)
from seamlessflow.proxy.options import ProxyOptions

SESSION_PATTERN = r"^[A-Za-z0-9._:\-]{1,128}$"
INT32_MAX = 2**31 - 1
ERRORS = {
    "400": "the body, a field or the session id is invalid",
    "401": "missing or unknown API key",
    "403": "the session id belongs to another team, or the call names another team's LoRA adapter as its model",
    "404": "no such route",
    "405": "method not allowed on this route",
    "409": "the session still has calls in flight (episode end)",
    "413": "the body is over the size limit",
    "429": "the proxy is at capacity; retry after `Retry-After`",
    "502": "the engine failed or answered badly",
    "503": "no engine, no free slot in time, or the call's events could not be recorded; retry",
}


def _int(low: int, high: int) -> dict:
    return {"type": ["integer", "null"], "minimum": low, "maximum": high}


def _bool() -> dict:
    return {"type": ["boolean", "null"]}


def _call_body(kind: str, config: ProxyOptions) -> dict:
    common = {
        "model": {"type": "string"},
        "n": _int(1, config.max_n),
        "stream": _bool(),
        "stream_options": {"type": ["object", "null"], "properties": {"include_usage": _bool()}},
        "max_tokens": _int(1, INT32_MAX),
        "max_completion_tokens": _int(1, INT32_MAX),
        "return_token_ids": _bool(),
    }
    if kind == "chat":
        specific = {
            "messages": {"type": "array", "minItems": 1, "items": {"type": "object"},
                         "description": "OpenAI chat messages; their fields are the engine's to check"},
            "logprobs": _bool(),
            "top_logprobs": _int(0, 20),
        }
        required = ["messages"]
    else:
        token = {"type": "integer", "minimum": 0, "maximum": INT32_MAX}
        specific = {
            "prompt": {"oneOf": [
                {"type": "string"},
                {"type": "array", "minItems": 1, "items": {"type": "string"}},
                {"type": "array", "minItems": 1, "items": token},
                {"type": "array", "minItems": 1, "items": {"type": "array", "minItems": 1, "items": token}},
            ]},
            "logprobs": _int(0, 20),
            "echo": {"enum": [False, None], "description": "echo is not supported through the proxy"},
        }
        required = ["prompt"]
    return {
        "type": "object",
        "required": required,
        "properties": {**common, **specific},
        "additionalProperties": True,
        "description": ("A null field counts as absent. Fields not listed pass through to the engine unchanged; "
                        "the engine validates them."),
    }


END_BODY = {
    "type": "object",
    "required": ["reward"],
    "additionalProperties": False,
    "properties": {
        "reward": {"type": "number", "description": "finite"},
        "status": {"type": "string", "enum": [s.value for s in EpisodeStatus]},
        "info": {"type": "object"},
        "group_id": {"type": ["string", "null"]},
        "task_id": {"type": ["string", "null"]},
        "call_rewards": {
            "type": "object",
            "additionalProperties": {"type": "number", "description": "finite"},
            "description": "rewards of single calls: keyed by the call's position in the session (\"0\", "
                           "\"1\", ...) or the call key it was sent with (Idempotency-Key or X-Request-Id)",
        },
    },
}
CALL_REWARD_BODY = {
    "type": "object",
    "required": ["reward"],
    "additionalProperties": False,
    "properties": {"reward": {"type": "number", "description": "finite"}},
}
CALL_PARAM = {
    "name": "call",
    "in": "path",
    "required": True,
    "description": "the call's position in the session (0, 1, ...) or the call key it was sent with",
    "schema": {"type": "string", "minLength": 1, "maxLength": 128},
}

ERROR = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["message", "type", "code"],
        "properties": {"message": {"type": "string", "minLength": 1}, "type": {"type": "string"},
                       "param": {"type": ["string", "null"]}, "code": {"type": "integer"}},
    }},
}


def _responses(ok: dict, errors: list[str]) -> dict:
    out: dict[str, Any] = {"200": ok}
    for status in errors:
        out[status] = {
            "description": ERRORS[status],
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}},
        }
    return out


def _json_ok(description: str, schema: dict | None = None) -> dict:
    return {"description": description, "content": {"application/json": {"schema": schema or {"type": "object"}}}}


SESSION_PARAM = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string", "pattern": SESSION_PATTERN},
}
SESSION_HEADER = {
    "name": "X-Session-Id",
    "in": "header",
    "required": False,
    "schema": {"type": "string", "pattern": SESSION_PATTERN},
    "description": "the session, when the path does not name it (else a new one is made)",
}
CALL_KEY = {"name": "Idempotency-Key", "in": "header", "required": False, "schema": {"type": "string"},
            "description": "names the call so a client retry keeps its call id "
                           "(else the call id is a digest of the body)"}
RETRY_COUNT = {
    "name": "X-Stainless-Retry-Count",
    "in": "header",
    "required": False,
    "schema": {"type": "string"},
    "description": "which retry of the same request this is, a count the openai and anthropic SDKs send "
    "(advisory: a value that is not a small count reads as 0); the assembler trains only the "
    "last attempt answered",
}
SSE_EVENT = {
    "type": "object",
    "required": ["data"],
    "properties": {"data": {"type": "string"}},
    "description": "a JSON chunk, an OpenAI error object, or [DONE]",
}
CALL_ERRORS = ["400", "401", "403", "404", "405", "413", "429", "502", "503"]


def _call_operation(kind: str, config: ProxyOptions, in_path: bool) -> dict:
    name = "chat" if kind == "chat" else "completions"
    ok = {
        "description": "the engine's answer (a JSON body, or server-sent events when `stream` is true)",
        "content": {
            "application/json": {"schema": {"type": "object", "required": ["id", "choices"]}},
            "text/event-stream": {"schema": SSE_EVENT},
        },
    }
    return {
        "post": {
            "operationId": f"{name}{'_in_session' if in_path else ''}",
            "summary": f"OpenAI {'chat completions' if kind == 'chat' else 'completions'}; token I/O recorded",
            "parameters": [SESSION_PARAM, CALL_KEY, RETRY_COUNT]
            if in_path
            else [SESSION_HEADER, CALL_KEY, RETRY_COUNT],
            "requestBody": {"required": True, "content": {"application/json": {"schema": _call_body(kind, config)}}},
            "responses": _responses(ok, CALL_ERRORS),
        }
    }


RESPONSES_BODY = {
    "type": "object",
    "required": ["model", "input"],
    "properties": {
        "model": {"type": "string"},
        "input": {
            "oneOf": [{"type": "string"}, {"type": "array", "minItems": 1, "items": {"type": "object"}}],
            "description": "message, function_call and function_call_output items; text content only",
        },
        "max_output_tokens": _int(1, INT32_MAX),
        "stream": _bool(),
        "previous_response_id": {"type": ["string", "null"], "minLength": 1,
                                 "description": "continue a stored response of this team: its conversation, then "
                                                "this input"},
        "store": {**_bool(), "description": "keep the response (default true) for previous_response_id and GET"},
        "conversation": CONVERSATION_PARAM,
    },
    "additionalProperties": True,
    "description": "OpenAI Responses; recorded as the chat call the engine runs. Built-in tools, images and files "
    "get 400.",
}
MESSAGES_BODY = {
    "type": "object",
    "required": ["model", "max_tokens", "messages"],
    "properties": {
        "model": {"type": "string"},
        "max_tokens": {"type": "integer", "minimum": 1, "maximum": INT32_MAX},
        "messages": {
            "type": "array",
            "minItems": 1,
            "items": {"type": "object"},
            "description": "text, tool_use and tool_result blocks; images and documents get 400",
        },
        "stream": _bool(),
    },
    "additionalProperties": True,
    "description": "Anthropic Messages; recorded as the chat call the engine runs.",
}
ANTHROPIC_ERROR = {
    "type": "object",
    "required": ["type", "error"],
    "properties": {
        "type": {"const": "error"},
        "error": {
            "type": "object",
            "required": ["type", "message"],
            "properties": {"type": {"type": "string"}, "message": {"type": "string", "minLength": 1}},
        },
    },
}


def _door_operation(door: str, in_path: bool) -> dict:
    """`responses` (OpenAI's Responses API) or `messages` (Anthropic's Messages API, Anthropic-shaped errors)."""
    body, required, error = (
        (RESPONSES_BODY, ["id", "output"], "Error")
        if door == "responses"
        else (MESSAGES_BODY, ["id", "content"], "AnthropicError")
    )
    ok = {
        "description": "the reply (a JSON body, or the API's server-sent events when `stream` is true)",
        "content": {
            "application/json": {"schema": {"type": "object", "required": required}},
            "text/event-stream": {"schema": SSE_EVENT},
        },
    }
    responses = _responses(ok, CALL_ERRORS)
    for status in CALL_ERRORS:
        responses[status]["content"]["application/json"]["schema"] = {"$ref": f"#/components/schemas/{error}"}
    operation = {
        "operationId": f"{door}{'_in_session' if in_path else ''}",
        "summary": f"{'OpenAI Responses' if door == 'responses' else 'Anthropic Messages'}; token I/O recorded",
        "parameters": [SESSION_PARAM, CALL_KEY, RETRY_COUNT] if in_path else [SESSION_HEADER, CALL_KEY, RETRY_COUNT],
        "requestBody": {"required": True, "content": {"application/json": {"schema": body}}},
        "responses": responses,
    }
    if door == "messages":
        operation["security"] = [{"team_key": []}, {"anthropic_key": []}]
    return {"post": operation}


def _models_operation(in_path: bool) -> dict:
    return {
        "get": {
            "operationId": f"models{'_in_session' if in_path else ''}",
            "summary": "the engines' served models",
            "parameters": [SESSION_PARAM] if in_path else [SESSION_HEADER],
            "responses": _responses(
                _json_ok("OpenAI model list", {"type": "object", "required": ["data"]}),
                ["400", "401", "404", "405", "502", "503"],
            ),
        }
    }


def openapi_document(config: ProxyOptions) -> dict:
    """The document for this proxy's configuration."""
    paths: dict[str, Any] = {}
    for prefix in ("", "/sessions/{session_id}"):
        in_path = bool(prefix)
        paths[prefix + "/v1/chat/completions"] = _call_operation("chat", config, in_path)
        paths[prefix + "/v1/completions"] = _call_operation("completions", config, in_path)
        paths[prefix + "/v1/responses"] = {**_door_operation("responses", in_path),
                                           **socket_operation(SESSION_PARAM if in_path else None)}
        paths[prefix + "/v1/responses/compact"] = compact_operation(_door_operation("responses", in_path), in_path)
        paths[prefix + "/v1/messages"] = _door_operation("messages", in_path)
        paths[prefix + "/v1/models"] = _models_operation(in_path)
        paths.update(stored_paths(prefix, SESSION_PARAM if in_path else None))
        paths.update(conversation_paths(prefix, SESSION_PARAM if in_path else None))
    paths["/sessions/{session_id}/end"] = {
        "post": {
            "operationId": "end_session",
            "summary": "the episode's end and reward; recorded after the session's last call",
            "parameters": [SESSION_PARAM],
            "requestBody": {"required": True, "content": {"application/json": {"schema": END_BODY}}},
            "responses": _responses(
                _json_ok("recorded", {"type": "object", "required": ["session_id", "recorded"]}),
                ["400", "401", "403", "404", "405", "409", "413", "503"],
            ),
        }
    }
    paths["/sessions/{session_id}/calls/{call}/reward"] = {
        "post": {
            "operationId": "reward_call",
            "summary": "a reward for one call, published with the session's end",
            "parameters": [SESSION_PARAM, CALL_PARAM],
            "requestBody": {"required": True, "content": {"application/json": {"schema": CALL_REWARD_BODY}}},
            "responses": _responses(
                _json_ok("kept", {"type": "object", "required": ["session_id", "call", "reward"]}),
                ["400", "401", "403", "404", "405", "409", "413", "503"],
            ),
        }
    }
    public: dict[str, Any] = {"security": []}
    paths["/healthz"] = {
        "get": {
            **public,
            "operationId": "health",
            "summary": "engines, pause state, load",
            "responses": {"200": _json_ok("health", {"type": "object", "required": ["status"]})},
        }
    }
    paths["/metrics"] = {
        "get": {
            **public,
            "operationId": "metrics",
            "summary": "Prometheus metrics",
            "responses": {
                "200": {"description": "exposition", "content": {"text/plain": {"schema": {"type": "string"}}}}
            },
        }
    }
    paths["/openapi.json"] = {
        "get": {
            **public,
            "operationId": "openapi",
            "summary": "this document",
            "responses": {"200": _json_ok("OpenAPI 3.1")},
        }
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "SeamlessFlow trajectory proxy",
            "version": "1",
            "description": (
                f"Bodies over {config.max_body_bytes} bytes get 413. Errors are OpenAI-shaped, "
                "except on /v1/messages (Anthropic-shaped)."
            ),
        },
        "paths": paths,
        "components": {
            "schemas": {"Error": ERROR, "AnthropicError": ANTHROPIC_ERROR},
            "securitySchemes": {
                "team_key": {"type": "http", "scheme": "bearer"},
                "anthropic_key": {"type": "apiKey", "in": "header", "name": "x-api-key"},
            },
        },
        "security": [{"team_key": []}],
    }

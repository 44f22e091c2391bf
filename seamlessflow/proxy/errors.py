"""Errors in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`), so SDKs raise the right class."""

from __future__ import annotations

import json
import re

from aiohttp import web

TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "service_unavailable",
    504: "timeout_error",
}


# vLLM's 400 for a prompt (plus max_tokens) past the window: "This model's maximum context length is N tokens..."
ENGINE_WINDOW = re.compile(r"maximum context length is (\d+) tokens")
WINDOW_SETTING = "rollout.max_model_len"


class ProxyError(Exception):
    """Raised anywhere on the request path; the server turns it into an OpenAI-shaped response."""

    def __init__(self, status: int, message: str, param: str | None = None, retry_after: int | None = None):
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.retry_after = retry_after

    def body(self) -> dict:
        return error_body(self.status, self.message, self.param)


def error_body(status: int, message: str, param: str | None = None) -> dict:
    return {"error": {"message": message, "type": TYPES.get(status, "api_error"), "param": param, "code": status}}


def error_response(exc: ProxyError, headers: dict | None = None) -> web.Response:
    headers = dict(headers or {})
    if exc.retry_after is not None:
        headers["Retry-After"] = str(exc.retry_after)
    return web.Response(
        status=exc.status, text=json.dumps(exc.body()), content_type="application/json", headers=headers
    )


def explain_window(body: dict) -> dict:
    """The engine's answer to a prompt past its window, with the setting that sets the window added.

    A harness whose system prompt does not fit is the first thing a newcomer meets; the engine's message
    names the window but not where it comes from. The call is rejected before any token is generated, so
    nothing of it is recorded."""
    error = body.get("error")
    message = error.get("message") if isinstance(error, dict) else None
    if not isinstance(error, dict) or not isinstance(message, str) or not (found := ENGINE_WINDOW.search(message)):
        return body
    hint = (f" The stack serves a window of {found.group(1)} tokens, set by `{WINDOW_SETTING}` (env "
            f"SEAMLESSFLOW_ROLLOUT__MAX_MODEL_LEN; at most the model's max_position_embeddings); nothing of "
            f"this call was recorded.")
    return {**body, "error": {**error, "message": message + hint, "param": error.get("param") or "messages"}}

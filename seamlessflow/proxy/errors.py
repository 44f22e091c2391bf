"""Errors in OpenAI's shape (`{"error": {"message", "type", "param", "code"}}`), so SDKs raise the right class."""

from __future__ import annotations

import json

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

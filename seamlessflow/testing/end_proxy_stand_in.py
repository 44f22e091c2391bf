"""A STAND-IN for the proxy's `POST /sessions/{id}/end` endpoint only, to test the worker's commit rules.

It serves no LLM calls; tests that need the real proxy and an engine are in tests/agents/test_end_to_end.py (slow).
"""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class EndProxyStandIn:
    def __init__(self) -> None:
        self.ends: list[dict[str, Any]] = []  # {"session_id", "body", "authorization"}
        self.answer_status = 200  # set to 503 (transient) or 404 (rejected) to test failures
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> EndProxyStandIn:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()

    def accepted(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self.ends)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        stand_in = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                parts = self.path.strip("/").split("/")
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                status = stand_in.answer_status if parts[:1] == ["sessions"] and parts[-1:] == ["end"] else 404
                if status == 200:
                    with stand_in._lock:
                        stand_in.ends.append({"session_id": parts[1], "body": body,
                                              "authorization": self.headers.get("Authorization")})
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(b'{"ok": true}' if status == 200 else b'{"error": "stand-in says no"}')

            def log_message(self, *args: Any) -> None:
                pass

        return Handler

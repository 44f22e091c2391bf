"""Talking to the trajectory proxy: where a session's OpenAI base URL is, and how a session is ended.

Why here: the end of a session is what makes a task's offset committable, so "accepted" must be exact: a
2xx answer. Transient failures (connection errors, 5xx, 429) are retried with backoff; a 4xx is a
permanent rejection that retrying cannot fix.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from seamlessflow.core.episodes import EpisodeStatus

RETRYABLE_STATUS = {408, 409, 425, 429}  # 409: the proxy still has calls of the session in flight


class EndRejected(RuntimeError):
    """The proxy answered the end with a 4xx: the request itself is wrong (unknown session, bad key)."""


class ProxyUnavailable(RuntimeError):
    """The proxy did not accept the end within the allowed time."""


def session_base_url(proxy_url: str, session_id: str) -> str:
    return f"{proxy_url.rstrip('/')}/sessions/{session_id}/v1"


@dataclass(frozen=True)
class SessionEnd:
    """The body of `POST /sessions/{session_id}/end`."""

    reward: float
    status: EpisodeStatus
    group_id: str
    task_id: str
    info: dict[str, Any] = field(default_factory=dict)
    call_rewards: dict[str, float] = field(default_factory=dict)  # call position or key -> reward

    def body(self) -> dict[str, Any]:
        body = {"reward": self.reward, "status": self.status, "info": self.info,
                "group_id": self.group_id, "task_id": self.task_id}
        if self.call_rewards:  # only when given: the body stays what proxies before per-turn rewards accept
            body["call_rewards"] = self.call_rewards
        return body


class ProxyClient:
    """Ends sessions on the proxy with the team's key; thread-safe (one pooled httpx client)."""

    def __init__(self, proxy_url: str, key: str, timeout_s: float = 30.0):
        self.proxy_url = proxy_url.rstrip("/")
        self.key = key
        self.http = httpx.Client(timeout=timeout_s, headers={"Authorization": f"Bearer {key}"})

    def end_session(self, session_id: str, end: SessionEnd, give_up_after_s: float = 60.0) -> dict:
        deadline = time.monotonic() + give_up_after_s
        delay = 0.2
        while True:
            problem = self._try_end(session_id, end)
            if isinstance(problem, dict):
                return problem
            if time.monotonic() + delay > deadline:
                raise ProxyUnavailable(f"ending session {session_id}: {problem}")
            time.sleep(delay)
            delay = min(delay * 2, 5.0)

    def _try_end(self, session_id: str, end: SessionEnd) -> dict | str:
        """The accepted answer's JSON, or why it should be retried; raises EndRejected on a 4xx."""
        try:
            response = self.http.post(f"{self.proxy_url}/sessions/{session_id}/end", json=end.body())
        except httpx.HTTPError as exc:
            return f"{type(exc).__name__}: {exc}"
        if response.is_success:
            try:
                return response.json() if response.content else {}
            except ValueError:
                return {}
        if 400 <= response.status_code < 500 and response.status_code not in RETRYABLE_STATUS:
            raise EndRejected(f"session {session_id}: {response.status_code} {response.text[:300]}")
        return f"HTTP {response.status_code} {response.text[:200]}"

    def close(self) -> None:
        self.http.close()

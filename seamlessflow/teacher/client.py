"""A teacher endpoint's HTTP client: vLLM's prompt logprobs of token ids, and its tokenizer for the start check.

Why prompt logprobs: one request with the whole trajectory as its prompt (token ids, never text) returns, for
every position t > 0, the log-probability of token t given exactly tokens[:t], under the raw model (temperature
1: prompt logprobs pass no sampler), which is the teacher's side of the reverse KL. `prompt_logprobs: 0` asks for
the prompt token's own logprob only; each answer names the id it scored, so `core.teaching` can check that the
answer stands on the trajectory's ids. `max_tokens: 1` is the least vLLM generates, so a trajectory must be
shorter than the teacher's window by one token.
"""

from __future__ import annotations

from typing import Any

import httpx

from seamlessflow.teacher.options import TeacherSpec

Scored = list[tuple[int, float] | None]


class TeacherClient:
    def __init__(self, spec: TeacherSpec, timeout_s: float, url: str):
        """``url``: the spec's, or its stack engine's as announced (`teacher/engines.py`)."""
        headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
        self.spec, self.url = spec, url
        self._http = httpx.Client(base_url=url.rstrip("/"), timeout=timeout_s, headers=headers)
        self.model = spec.model

    def close(self) -> None:
        self._http.close()

    def served_model(self) -> str:
        """The configured model name, else the first one the endpoint serves."""
        if not self.model:
            reply = self._http.get("/v1/models")
            reply.raise_for_status()
            self.model = str(reply.json()["data"][0]["id"])
        return self.model

    def tokenize(self, text: str) -> list[int]:
        """The teacher's ids for ``text`` (no special tokens added), from its own tokenizer."""
        body = {"model": self.served_model(), "prompt": text, "add_special_tokens": False}
        reply = self._http.post("/tokenize", json=body)
        reply.raise_for_status()
        return [int(t) for t in reply.json()["tokens"]]

    def score(self, tokens: list[int]) -> Scored:
        """Per position, (the id the teacher scored, its logprob given the ids before it); None at position 0."""
        body = {"model": self.served_model(), "prompt": tokens, "max_tokens": 1, "prompt_logprobs": 0,
                "temperature": 0.0}
        reply = self._http.post("/v1/completions", json=body)
        if reply.status_code >= 400:  # a 4xx (a trajectory longer than the window) fails the same way again
            raise TeacherError(f"HTTP {reply.status_code}: {reply.text[:300]}", retryable=reply.status_code >= 500)
        entries = reply.json()["choices"][0].get("prompt_logprobs")
        if entries is None:
            raise TeacherError("the endpoint returned no prompt_logprobs (not a vLLM-compatible teacher?)",
                               retryable=False)
        return [_scored_at(entry, tokens[t] if t < len(tokens) else -1) for t, entry in enumerate(entries)]


class TeacherError(RuntimeError):
    """A teacher request that gave no usable answer; a `retryable` one is tried again (`teacher.max_attempts`)."""

    def __init__(self, message: str, retryable: bool = True):
        super().__init__(message)
        self.retryable = retryable


def _scored_at(entry: dict[str, Any] | None, expected: int) -> tuple[int, float] | None:
    """The prompt token's entry of one position: the only one with `prompt_logprobs: 0`; where vLLM listed more
    (the token among a top-k), the expected id's, so a position that lacks it reads as another id (misaligned)."""
    if not entry:
        return None
    key = str(expected) if str(expected) in entry else next(iter(entry))
    value = entry[key]
    return int(key), float(value["logprob"] if isinstance(value, dict) else value)

"""Token capture: what each upstream stream chunk contributed, accumulated per choice.

Pure (no I/O). The proxy always streams from the engine; every chunk is split into `Piece`s, one per
choice it mentions, and each piece is absorbed into that choice's `ChoiceCapture` with the policy version
the engine had when the tokens arrived. Chat chunks (`/v1/chat/completions`) and completion chunks
(`/v1/completions`, also used for token-in continuations after a pause) are read into the same shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any


class UpstreamFormatError(ValueError):
    """An engine chunk the proxy cannot read (a different server, or a vLLM without return_token_ids)."""


@dataclass
class Piece:
    index: int
    text: str = ""
    delta: dict | None = None  # chat: the engine's delta (role, content, tool_calls, reasoning)
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)  # sampled-token logprob per token id
    chat_logprobs: list[dict] = field(default_factory=list)  # chat-format entries, for clients that asked
    completion_logprobs: dict | None = None  # completions-format slice, for clients that asked
    finish_reason: str | None = None
    stop_reason: Any = None
    prompt_ids: list[int] | None = None  # completions: per-choice prompt ids (first chunk)


@dataclass
class ChunkHead:
    id: str | None
    created: int | None
    model: str | None
    prompt_ids: list[int] | None  # chat: top-level prompt ids (first chunk only)


def read_chunk(chunk: Any, kind: str) -> tuple[ChunkHead, list[Piece]]:
    if not isinstance(chunk, dict):
        raise UpstreamFormatError("engine chunk is not a JSON object")
    if "error" in chunk and "choices" not in chunk:
        raise UpstreamFormatError(f"engine error mid-stream: {chunk['error']}")
    head = ChunkHead(chunk.get("id"), chunk.get("created"), chunk.get("model"), chunk.get("prompt_token_ids"))
    read = _chat_piece if kind == "chat" else _completion_piece
    return head, [read(choice) for choice in chunk.get("choices") or ()]


def _chat_piece(choice: dict) -> Piece:
    delta = choice.get("delta") or {}
    entries = (choice.get("logprobs") or {}).get("content") or []
    return Piece(
        index=choice.get("index", 0),
        text=delta.get("content") or "",
        delta=delta,
        token_ids=list(choice.get("token_ids") or ()),
        logprobs=[_finite(e.get("logprob")) for e in entries],
        chat_logprobs=entries,
        finish_reason=choice.get("finish_reason"),
        stop_reason=choice.get("stop_reason"),
    )


def _completion_piece(choice: dict) -> Piece:
    logprobs = choice.get("logprobs") or None
    return Piece(
        index=choice.get("index", 0),
        text=choice.get("text") or "",
        token_ids=list(choice.get("token_ids") or ()),
        logprobs=[_finite(v) for v in (logprobs or {}).get("token_logprobs") or ()],
        completion_logprobs=logprobs,
        finish_reason=choice.get("finish_reason"),
        stop_reason=choice.get("stop_reason"),
        prompt_ids=choice.get("prompt_token_ids"),
    )


INVALID_LOGPROB = float("nan")  # what a token's logprob is recorded as when the engine gave none usable
MINUS_INF_AS_SENT = -9999.0  # vLLM writes -inf in JSON as -9999.0


def _finite(value: Any) -> float:
    """The engine's logprob, or NaN for one it did not give as a finite number: null, -inf (sent as -9999.0),
    anything not a number. Never 0.0 (probability 1, which a ratio would trust): a NaN is masked out of the loss
    and counted (`TokenIO.invalid_logprobs`, `Trajectory.masked_tokens`)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return INVALID_LOGPROB
    value = float(value)
    return value if math.isfinite(value) and value > MINUS_INF_AS_SENT else INVALID_LOGPROB


@dataclass
class ChoiceCapture:
    index: int
    prompt_ids: list[int] = field(default_factory=list)
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    finish_reason: str | None = None
    stop_reason: Any = None
    # what the client is shown, for assembling a non-streaming response
    text_parts: list[str] = field(default_factory=list)
    reasoning_parts: list[str] = field(default_factory=list)
    tool_calls: dict[int, dict] = field(default_factory=dict)
    chat_logprobs: list[dict] = field(default_factory=list)
    completion_logprobs: dict[str, list] = field(default_factory=dict)
    role: str = "assistant"
    # completion tokens without a finite logprob from the engine (NaN in `logprobs`): a piece whose logprobs did not
    # match its token ids in number counts whole, as no logprob of it can be tied to its token
    invalid_logprobs: int = 0

    @property
    def finished(self) -> bool:
        return self.finish_reason is not None

    def absorb(self, piece: Piece, version: int) -> None:
        ids = piece.token_ids
        logprobs = piece.logprobs
        if len(logprobs) != len(ids):
            logprobs = [INVALID_LOGPROB] * len(ids)
        self.invalid_logprobs += sum(1 for value in logprobs if math.isnan(value))
        self.completion_ids.extend(ids)
        self.logprobs.extend(logprobs)
        self.versions.extend([version] * len(ids))
        if piece.prompt_ids is not None and not self.prompt_ids:
            self.prompt_ids = list(piece.prompt_ids)
        if piece.finish_reason is not None:
            self.finish_reason = piece.finish_reason
            self.stop_reason = piece.stop_reason
        self._absorb_shown(piece)

    def _absorb_shown(self, piece: Piece) -> None:
        if piece.text:
            self.text_parts.append(piece.text)
        delta = piece.delta or {}
        if delta.get("role"):
            self.role = delta["role"]
        reasoning = delta.get("reasoning_content") or delta.get("reasoning")
        if reasoning:
            self.reasoning_parts.append(reasoning)
        for call in delta.get("tool_calls") or ():
            merge_tool_call(self.tool_calls, call)
        self.chat_logprobs.extend(piece.chat_logprobs)
        if piece.completion_logprobs:
            for key, values in piece.completion_logprobs.items():
                if isinstance(values, list):
                    self.completion_logprobs.setdefault(key, []).extend(values)


def merge_tool_call(calls: dict[int, dict], delta: dict) -> None:
    """Streaming tool calls arrive as fragments keyed by index: the first names it, later ones add arguments."""
    index = delta.get("index", len(calls))
    call = calls.setdefault(index, {"id": None, "type": "function", "function": {"name": "", "arguments": ""}})
    if delta.get("id"):
        call["id"] = delta["id"]
    if delta.get("type"):
        call["type"] = delta["type"]
    function = delta.get("function") or {}
    if function.get("name"):
        call["function"]["name"] += function["name"]
    if function.get("arguments"):
        call["function"]["arguments"] += function["arguments"]


@dataclass
class CallCapture:
    """Every choice of one call, plus the prompt ids the engine reported."""

    n: int  # choices per prompt
    num_prompts: int = 1  # completions may send several prompts; choice i belongs to prompt i // n
    prompt_ids: list[int] | None = None
    choices: list[ChoiceCapture] = field(default_factory=list)
    response_id: str | None = None
    created: int | None = None
    model: str | None = None

    def __post_init__(self) -> None:
        if not self.choices:
            self.choices = [ChoiceCapture(i) for i in range(self.n * self.num_prompts)]

    def absorb_head(self, head: ChunkHead) -> None:
        if head.prompt_ids is not None and self.prompt_ids is None:
            self.prompt_ids = list(head.prompt_ids)
            for choice in self.choices:
                if not choice.prompt_ids:
                    choice.prompt_ids = list(head.prompt_ids)
        self.response_id = self.response_id or head.id
        self.created = self.created or head.created
        self.model = self.model or head.model

    def choice(self, index: int) -> ChoiceCapture:
        if not 0 <= index < len(self.choices):
            raise UpstreamFormatError(f"engine sent choice index {index} for a call with {len(self.choices)} choices")
        return self.choices[index]

    @property
    def finished(self) -> bool:
        return all(c.finished for c in self.choices)

    @property
    def started(self) -> bool:
        """Whether the engine told us the prompt ids, so a cut call can continue from tokens."""
        return all(c.prompt_ids for c in self.choices)

    @property
    def prompt_tokens(self) -> int:
        return sum(len(c.prompt_ids) for c in self.choices[:: max(self.n, 1)]) if self.choices else 0

    @property
    def completion_tokens(self) -> int:
        return sum(len(c.completion_ids) for c in self.choices)

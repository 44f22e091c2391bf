"""What the agent sees: OpenAI-shaped chunks and responses rebuilt from captured pieces.

Pure. The engine's extra fields (token ids, logprobs) are shown only if the client asked for them, using
vLLM's own field names. Pieces of a token-in continuation (completions format) are shown in the client's
format under the original response id, so a call cut by a pause reads as one seamless response.
"""

from __future__ import annotations

import time
from typing import Any

from seamlessflow.proxy.capture import CallCapture, ChoiceCapture, Piece
from seamlessflow.proxy.requests import CallRequest


class Shaper:
    def __init__(self, request: CallRequest, capture: CallCapture, fallback_id: str, model: str | None = None):
        self.request = request
        self.capture = capture
        self.fallback_id = fallback_id
        self.model_override = model  # the client's model name when the proxy rewrote it upstream
        self._prompt_ids_sent: set[int] = set()

    # -- identity -------------------------------------------------------------------------------------
    @property
    def response_id(self) -> str:
        return self.capture.response_id or self.fallback_id

    @property
    def model(self) -> str:
        return self.model_override or self.capture.model or self.request.model

    @property
    def created(self) -> int:
        return self.capture.created or int(time.time())

    def _head(self, obj: str) -> dict[str, Any]:
        return {"id": self.response_id, "object": obj, "created": self.created, "model": self.model}

    # -- streaming ------------------------------------------------------------------------------------
    def chunk(self, pieces: list[Piece], from_kind: str) -> dict | None:
        """The client's chunk for one upstream chunk, or None when nothing in it is for the client."""
        choices = [c for c in (self._choice_chunk(p, from_kind) for p in pieces) if c is not None]
        if not choices:
            return None
        if self.request.kind == "chat":
            out = self._head("chat.completion.chunk")
            if self.request.wants_token_ids and 0 not in self._prompt_ids_sent and self.capture.prompt_ids:
                out["prompt_token_ids"] = self.capture.prompt_ids
                self._prompt_ids_sent.add(0)
        else:
            out = self._head("text_completion")
        out["choices"] = choices
        return out

    def _choice_chunk(self, piece: Piece, from_kind: str) -> dict | None:
        wants_ids, wants_lp = self.request.wants_token_ids, self.request.wants_logprobs
        if self.request.kind == "chat":
            delta = piece.delta if from_kind == "chat" else ({"content": piece.text} if piece.text else {})
            shown = bool(delta and any(v not in (None, "", []) or k == "role" for k, v in delta.items()))
            if not (shown or piece.finish_reason or (wants_ids and piece.token_ids) or (wants_lp and piece.logprobs)):
                return None
            out: dict[str, Any] = {"index": piece.index, "delta": delta or {}, "logprobs": None}
            if wants_lp:
                entries = piece.chat_logprobs if from_kind == "chat" else chat_entries(piece.completion_logprobs)
                out["logprobs"] = {"content": entries}
        else:
            if not (
                piece.text or piece.finish_reason or (wants_ids and piece.token_ids) or (wants_lp and piece.logprobs)
            ):
                return None
            out = {
                "index": piece.index,
                "text": piece.text,
                "logprobs": piece.completion_logprobs if wants_lp else None,
            }
            if wants_ids and piece.index not in self._prompt_ids_sent:
                out["prompt_token_ids"] = self.capture.choice(piece.index).prompt_ids
                self._prompt_ids_sent.add(piece.index)
        out["finish_reason"] = piece.finish_reason
        if piece.finish_reason is not None:
            out["stop_reason"] = piece.stop_reason
        if wants_ids:
            out["token_ids"] = piece.token_ids
        return out

    def usage_chunk(self) -> dict:
        obj = "chat.completion.chunk" if self.request.kind == "chat" else "text_completion"
        return {**self._head(obj), "choices": [], "usage": self.usage()}

    def usage(self) -> dict:
        prompt, completion = self.capture.prompt_tokens, self.capture.completion_tokens
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}

    # -- non-streaming --------------------------------------------------------------------------------
    def response(self) -> dict:
        if self.request.kind == "chat":
            out = {**self._head("chat.completion"), "choices": [self._chat_choice(c) for c in self.capture.choices]}
            if self.request.wants_token_ids:
                out["prompt_token_ids"] = self.capture.prompt_ids
        else:
            out = {
                **self._head("text_completion"),
                "choices": [self._completion_choice(c) for c in self.capture.choices],
            }
        out["usage"] = self.usage()
        return out

    def _chat_choice(self, choice: ChoiceCapture) -> dict:
        text = "".join(choice.text_parts)
        message: dict[str, Any] = {"role": choice.role, "content": text if text or not choice.tool_calls else None}
        if choice.tool_calls:
            message["tool_calls"] = [choice.tool_calls[i] for i in sorted(choice.tool_calls)]
        if choice.reasoning_parts:
            message["reasoning_content"] = "".join(choice.reasoning_parts)
        out = {
            "index": choice.index,
            "message": message,
            "logprobs": {"content": choice.chat_logprobs} if self.request.wants_logprobs else None,
            "finish_reason": choice.finish_reason,
            "stop_reason": choice.stop_reason,
        }
        if self.request.wants_token_ids:
            out["token_ids"] = choice.completion_ids
        return out

    def _completion_choice(self, choice: ChoiceCapture) -> dict:
        out = {
            "index": choice.index,
            "text": "".join(choice.text_parts),
            "logprobs": choice.completion_logprobs if self.request.wants_logprobs else None,
            "finish_reason": choice.finish_reason,
            "stop_reason": choice.stop_reason,
        }
        if self.request.wants_token_ids:
            out["prompt_token_ids"] = choice.prompt_ids
            out["token_ids"] = choice.completion_ids
        return out


def chat_entries(logprobs: dict | None) -> list[dict]:
    """Completions-format logprobs (parallel lists) as chat-format entries, for continued chat calls."""
    if not logprobs:
        return []
    tokens = logprobs.get("tokens") or []
    values = logprobs.get("token_logprobs") or []
    tops = logprobs.get("top_logprobs") or []
    out = []
    for j, token in enumerate(tokens):
        top = tops[j] if j < len(tops) and isinstance(tops[j], dict) else {}
        out.append(
            {
                "token": token,
                "logprob": values[j] if j < len(values) else None,
                "bytes": list(token.encode()) if isinstance(token, str) else None,
                "top_logprobs": [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in top.items()],
            }
        )
    return out

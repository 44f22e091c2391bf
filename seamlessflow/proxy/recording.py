"""Recording: a finished call becomes one `TokenIO` per choice on the session-events topic, acknowledged by Kafka.

One path for every front door (Chat Completions, Completions, Responses, Messages): each hands over a
`CallResult` (what the engine saw and generated, whatever API the agent spoke) and gets the published events
back, or a 503 when Kafka did not confirm them. Only acknowledged records become prompt-delta bases
(`deltas.py`) and count in the session's statistics (the gatekeeper's). A session's end follows its calls here.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from seamlessflow.avro import CodecError
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.core.sampling import Sampled
from seamlessflow.messages import EpisodeEnd, TokenIO, now_ms
from seamlessflow.proxy.calls import CallIdentity
from seamlessflow.proxy.capture import CallCapture, ChoiceCapture
from seamlessflow.proxy.deltas import PromptBases, token_sequence
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.metrics import ProxyMetrics
from seamlessflow.proxy.publisher import EventPublisher, PublishFailed

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CallResult:
    """One finished call: who made it, the tokens per choice, which engines generated them and how long it took."""

    who: CallIdentity
    capture: CallCapture
    engine_ids: tuple[str, ...]
    timings_ms: tuple[float, float, float]  # queued, first token, total
    adapter: str | None = None  # the team's LoRA adapter that served it; None: the base model
    sampled: Sampled = field(default_factory=lambda: Sampled(1.0))  # how the engine sampled it (`rollout.sampling`)


class Recorder:
    """Publishes calls' token events (and episode ends) keyed by session, so their order on the topic holds."""

    def __init__(self, publisher: EventPublisher, topic: str, run: str, bases: PromptBases, metrics: ProxyMetrics,
                 delivery_timeout_s: float, retry_after_s: int, prompt_deltas: bool):
        self.publisher, self.topic, self.run = publisher, topic, run
        self.bases, self.metrics = bases, metrics
        self.delivery_timeout_s, self.retry_after_s = delivery_timeout_s, retry_after_s
        self.prompt_deltas = prompt_deltas

    async def record(self, result: CallResult) -> list[TokenIO]:
        """Publishes one TokenIO per choice and waits for Kafka's acknowledgement (else 503); then the
        choices' sequences become bases for the session's next prompts."""
        pairs = [self._event(result, choice) for choice in result.capture.choices]
        events = [event for event, _ in pairs]
        await self.publish(events, result.who.session_id)
        if self.prompt_deltas:
            for event, sequence in pairs:
                self.bases.remember(result.who.session_id, event.event_id, sequence)
        self.metrics.tokens.labels("prompt").inc(result.capture.prompt_tokens)
        self.metrics.tokens.labels("completion").inc(result.capture.completion_tokens)
        return events

    async def end(self, session_id: str, team: str, reward: float, status: EpisodeStatus, info: dict[str, Any],
                  num_calls: int, group_id: str | None, task_id: str | None, call_rewards: dict[str, float]) -> None:
        """Publishes the session's `EpisodeEnd` after its calls' events (same key: the topic keeps their order);
        its prompt-delta bases are forgotten."""
        event = EpisodeEnd(
            event_id=f"{session_id}.end", session_id=session_id, team=team, run=self.run, reward=reward,
            status=status, info_json=json.dumps(info), num_calls=num_calls, created_at_ms=now_ms(),
            group_id=group_id, task_id=task_id, call_rewards=call_rewards,
        )
        await self.publish([event], session_id)
        self.bases.forget(session_id)

    def _event(self, result: CallResult, choice: ChoiceCapture) -> tuple[TokenIO, np.ndarray]:
        sequence, n_prompt = token_sequence(choice.prompt_ids, choice.completion_ids), len(choice.prompt_ids)
        who = result.who
        base = self.bases.base_for(who.session_id, sequence[:n_prompt]) if self.prompt_deltas else None
        queue_ms, first_ms, total_ms = result.timings_ms
        sent = result.sampled.upstream()
        event = TokenIO(
            event_id=event_id(who.call_id, choice.index, n_prompt, sequence),
            session_id=who.session_id,
            team=who.team,
            run=self.run,
            call_id=who.call_id,
            engine_id=result.engine_ids[0] if result.engine_ids else "",
            choice_index=choice.index,
            prompt_ids=choice.prompt_ids[base[1]:] if base else choice.prompt_ids,
            completion_ids=choice.completion_ids,
            logprobs=choice.logprobs,
            versions=choice.versions,
            finish_reason=choice.finish_reason or "unknown",
            queue_ms=queue_ms,
            first_token_ms=first_ms,
            total_ms=total_ms,
            created_at_ms=now_ms(),
            prompt_base_id=base[0] if base else None,
            prompt_base_tokens=base[1] if base else 0,
            attempt=who.attempt,
            adapter=result.adapter,
            temperature=result.sampled.temperature,
            top_p=sent["top_p"],  # what the engine was sent (`core.sampling`: every truncation off)
            top_k=sent["top_k"],
            min_p=sent["min_p"],
            logprob_space=result.sampled.logprob_space.value,
            invalid_logprobs=choice.invalid_logprobs,
        )
        if choice.invalid_logprobs:
            self.metrics.invalid_logprobs.labels(who.team).inc(choice.invalid_logprobs)
        return event, sequence

    async def publish(self, events: list, key: str) -> None:
        """Publishes and waits for every acknowledgement; a 503 the agent may retry when any is missing."""
        try:
            futures = [self.publisher.publish(self.topic, key, event) for event in events]
            async with asyncio.timeout(self.delivery_timeout_s):
                await (futures[0] if len(futures) == 1 else asyncio.gather(*futures))  # most calls: one choice
        except (TimeoutError, PublishFailed, CodecError) as exc:
            self.metrics.events.labels("failed").inc(len(events))
            log.error("events for session %s not recorded: %s", key, exc)
            raise ProxyError(
                503, "the call's token events could not be recorded; retry", retry_after=self.retry_after_s
            ) from None
        self.metrics.events.labels("produced").inc(len(events))


def event_id(call_id: str, choice: int, n_prompt: int, sequence: np.ndarray) -> str:
    """`<call_id>-<tokens digest>.<choice>`. A client retry of the same request (the same Idempotency-Key, or the
    same body) keeps the call id (recognisable downstream), and a copy of the same record keeps the whole id
    (de-duplicated). But when the
    first attempt was recorded and its reply lost (the proxy died between Kafka's acknowledgement and the
    reply), the retry generates anew: different tokens, so a different id, and both are kept instead
    of the first shadowing the tokens the agent actually received (found by a chaos run); the assembler then
    trains the later attempt when the client counted it (`TokenIO.attempt`), else both, as a fork. The digest runs
    over the prompt's length and the choice's int32 sequence (`deltas.token_sequence`)."""
    tokens = n_prompt.to_bytes(4, "little") + sequence.tobytes()
    digest = hashlib.blake2b(tokens, digest_size=4).hexdigest()
    return f"{call_id}-{digest}.{choice}"

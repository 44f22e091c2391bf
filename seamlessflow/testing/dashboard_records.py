"""Sessions and role switches shaped like the proxy and the resources publish them, for the dashboard tests."""

from __future__ import annotations

import time

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import EpisodeEnd, ResourceStatus, TokenIO, new_id
from seamlessflow.topics import Topics


def call(session: str, call_id: str, prompt: list[int], completion: list[int], version: int = 1,
         at_ms: int = 0) -> TokenIO:
    return TokenIO(f"{call_id}.0", session, "default", "default", call_id, "engine-0", 0, prompt, completion,
                   [-0.25] * len(completion), [version] * len(completion), "stop", 1.0, 2.0, 3.0, at_ms)


def end(session: str, reward: float, num_calls: int = 2, at_ms: int = 0) -> EpisodeEnd:
    return EpisodeEnd(f"{session}/end", session, "default", "default", reward, EpisodeStatus.DONE, '{"answer": 5}',
                      num_calls, at_ms, group_id=f"g-{session}", task_id=f"t-{session}")


def sessions(at_ms: int) -> list:
    """An extended two-turn session (versions 1 then 2), and one whose second turn forks."""
    return [call("extended", "e1", [1, 2], [3, 4], 1, at_ms), call("extended", "e2", [1, 2, 3, 4, 5], [6], 2, at_ms),
            end("extended", 1.0, at_ms=at_ms),
            call("forked", "f1", [1, 2], [3, 4], 1, at_ms), call("forked", "f2", [1, 2, 7], [8, 9], 2, at_ms),
            end("forked", 0.5, at_ms=at_ms)]


def switching_rollout(at_ms: int) -> list[ResourceStatus]:
    """rollout-1 (tags rollout, train) generating, then lent to trainer-1, which trains on it 3-6 s, then back."""
    roles = ["rollout"] * 3 + ["train"] * 3 + ["rollout"] * 3
    engine = [ResourceStatus(new_id(), "rollout-1", ResourceKind.ROLLOUT, ["rollout", "train"], role,
                             ResourceState.ACTIVE, 1, {"tokens_per_s": 50.0, "requests_running": 2.0}, "default",
                             "default", at_ms + 1000 * i)
              for i, role in enumerate(roles)]
    trainer = [ResourceStatus(new_id(), "trainer-1", ResourceKind.TRAINER, ["train"], "train", ResourceState.ACTIVE,
                              1, {"busy_s": float(min(max(i - 3, 0), 3))}, "default", "default", at_ms + 1000 * i)
               for i in range(len(roles))]
    return engine + trainer


def publish_sessions_and_switches(settings: Settings, codec: Codec) -> None:
    topics, producer = Topics(settings), MessageProducer(settings, codec)
    t0 = int(time.time() * 1000) - 30_000
    for message in sessions(t0):
        producer.send(topics.session_events, message.session_id, message)
    for status in switching_rollout(t0):
        producer.send(topics.status, status.resource_id, status)
    producer.flush()

"""Small sessions for replay tests, and a way to put them on topics with chosen timestamps."""

from __future__ import annotations

from collections.abc import Iterable

from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.episodes import EpisodeStatus, TrajectoryStatus
from seamlessflow.kafka.io import MessageProducer, Record
from seamlessflow.messages import EpisodeEnd, TokenIO, Trajectory


def call(session: str, call_id: str, prompt: list[int], completion: list[int], version: int = 1, team: str = "red",
         logprob: float = -0.5) -> TokenIO:
    return TokenIO(f"{call_id}.0", session, team, "run1", call_id, "engine-0", 0, prompt, completion,
                   [logprob] * len(completion), [version] * len(completion), "stop", 1.0, 2.0, 3.0, 1000)


def end(session: str, reward: float = 1.0, status: str = "done", num_calls: int = 2, team: str = "red") -> EpisodeEnd:
    return EpisodeEnd(f"{session}/end", session, team, "run1", reward, EpisodeStatus(status), "{}", num_calls, 5000,
                      group_id=f"g-{session}", task_id=f"t-{session}")


def two_turn_session(session: str = "s1", team: str = "red", reward: float = 1.0,
                     status: str = "done") -> list[TokenIO | EpisodeEnd]:
    """Turn 2 extends turn 1 with one fed token (5): one sequence [1 2 3 4 5 6]."""
    return [call(session, f"{session}c1", [1, 2], [3, 4], team=team),
            call(session, f"{session}c2", [1, 2, 3, 4, 5], [6], version=2, team=team),
            end(session, reward, status, team=team)]


def forked_session(session: str = "f1", team: str = "red") -> list[TokenIO | EpisodeEnd]:
    """Turn 2 drops turn 1's answer and asks again: a fork, so two sequences."""
    return [call(session, f"{session}c1", [1, 2], [3, 4], team=team),
            call(session, f"{session}c2", [1, 2, 7], [8], team=team),
            end(session, 0.5, team=team)]


def expected_two_turn(session: str = "s1", team: str = "red", reward: float = 1.0) -> Trajectory:
    """Written out by hand (not computed) so --check is compared with an independent answer."""
    return Trajectory(f"{session}/0", session, 0, f"g-{session}", f"t-{session}", team, "run1",
                      [1, 2, 3, 4, 5, 6], [0, 0, 1, 1, 0, 1], [0.0, 0.0, -0.5, -0.5, 0.0, -0.5],
                      [-1, -1, 1, 1, -1, 2], reward, TrajectoryStatus.DONE, 2, 0, 5000,
                      '{"outcomes": {"extension": 1, "start": 1}}', turn_ends=[4, 6], turn_rewards=[0.0, 0.0])


def produce(settings: Settings, codec: Codec, topic: str, messages: Iterable[TokenIO | EpisodeEnd | Trajectory],
            timestamp_ms: int | None = None) -> None:
    """Keyed like the real producers (session id, or group id for trajectories); durable on return."""
    producer = MessageProducer(settings, codec)
    for message in messages:
        key = message.group_id if isinstance(message, Trajectory) else message.session_id
        producer.send(topic, key, message, timestamp_ms=timestamp_ms or 0)
    producer.flush(30)


def records(messages: Iterable[object], codec: Codec, topic: str = "t.session-events",
            start_ms: int = 1000) -> list[Record]:
    """In-memory Records (as if read from a topic) for the pure tests."""
    return [Record(topic, 0, i, getattr(m, "session_id", "").encode(), codec.encode(m, topic), start_ms + i, m)
            for i, m in enumerate(messages)]

"""Session records for the chaos audit's tests: one call's token I/O and a session's end, team `red`."""

from __future__ import annotations

from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.messages import EpisodeEnd, TokenIO


def token_io(session: str, call: str, prompt: list[int], completion: list[int], version: int = 1,
             choice: int = 0) -> TokenIO:
    return TokenIO(f"{call}.{choice}", session, "red", "r", call, "e0", choice, prompt, completion,
                   [-0.5 - i / 8 for i in range(len(completion))], [version] * len(completion), "stop",
                   0.0, 0.0, 0.0, 1)


def end(session: str, reward: float = 1.0) -> EpisodeEnd:
    return EpisodeEnd(f"{session}.end", session, "red", "r", reward, EpisodeStatus.DONE, "{}", -1, 2, group_id="g1",
                      task_id="t1")

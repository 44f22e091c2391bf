"""How a session ended (`EpisodeEnd.status`) and what an assembled trajectory's status says (`Trajectory.status`).

Why two enums: an agent (or the assembler closing an idle session) ends an episode `done`, `failed` or
`aborted`; the assembler adds `truncated` when the session outgrew its token bound, which only a trajectory
can be.
"""

from __future__ import annotations

from enum import StrEnum


class EpisodeStatus(StrEnum):
    """Values of `EpisodeEnd.status`."""

    DONE = "done"
    FAILED = "failed"
    ABORTED = "aborted"


class TrajectoryStatus(StrEnum):
    """Values of `Trajectory.status`: the episode's status, or `truncated`."""

    DONE = "done"
    FAILED = "failed"
    ABORTED = "aborted"
    TRUNCATED = "truncated"
    UNSCORABLE = "unscorable"  # its reward function could not score it (seamlessflow/rewards): never trained


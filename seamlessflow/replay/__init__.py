"""`seamlessflow replay`: read, filter, render, verify, re-publish and archive session data."""

from seamlessflow.replay.archive import archive_file, read_archive, write_archive
from seamlessflow.replay.check import CheckReport, Mismatch, check, differences, rebuild
from seamlessflow.replay.select import Filter, SessionEvents, group_sessions, select_sessions, select_trajectories
from seamlessflow.replay.source import StartPlan, plan_since, read_from, verified_start
from seamlessflow.replay.turns import Segment, Turn, segments, session_json, session_turns, trajectory_json

__all__ = [
    "CheckReport", "Filter", "Mismatch", "Segment", "SessionEvents", "StartPlan", "Turn", "archive_file", "check",
    "differences", "group_sessions", "plan_since", "read_archive", "read_from", "rebuild", "segments",
    "select_sessions", "select_trajectories", "session_json", "session_turns", "trajectory_json",
    "verified_start", "write_archive",
]

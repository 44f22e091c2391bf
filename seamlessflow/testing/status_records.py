"""Hand-written status/ack records for timeline and resource-row tests (times in seconds from `BASE_MS`)."""

from __future__ import annotations

from seamlessflow.core.control import CommandKind, Outcome
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.messages import CommandAck, ResourceStatus

BASE_MS = 1_700_000_000_000


def status(rid: str, t: float, active: str, state: str = "active", kind: str = "rollout", version: int = 0,
           tags: tuple[str, ...] = ("rollout",), hardware: tuple[str, ...] = (), **figures: float) -> ResourceStatus:
    return ResourceStatus(f"{rid}@{t}", rid, ResourceKind(kind), list(tags), active, ResourceState(state), version,
                          dict(figures), "default", "default", BASE_MS + int(t * 1000), hardware_tags=list(hardware))


def ack(rid: str, t: float, command: str, duration_s: float, outcome: str = "ok") -> CommandAck:
    return CommandAck(f"{rid}/ack@{t}", rid, "c", CommandKind(command), 1, Outcome(outcome), "", duration_s * 1000,
                      "default", "default", BASE_MS + int(t * 1000))


def two_resource_run() -> list:
    """r0 generates throughout but loads weights during [5, 6]; r1 generates, switches, is lent to trainer-0,
    which trains 5-9 s on it, then is held in the idle role.

    Per device (r0, r1; the trainer is none of its own): busy r0 9 s (10 minus the 1 s sync), r1 8 s (4 rollout
    + 4 train) of 2 x 10 s: bubble 3/20 = 15 %.
    """
    flex = ("rollout", "train")
    return [
        status("r0", 0, "rollout"), status("r0", 10, "rollout"),
        status("r1", 0, "rollout", tags=flex), status("r1", 4, "train", "switching", tags=flex),
        status("r1", 5, "train", tags=flex), status("r1", 9, "idle", tags=flex), status("r1", 10, "idle", tags=flex),
        ack("r0", 6, "load_weights", 1.0),
        *(status("trainer-0", t, "train", kind="trainer", tags=("train",), busy_s=busy)
          for t, busy in ((0, 0.0), (5, 0.0), (9, 4.0), (10, 4.0))),
        status("proxy", 3, "proxy", kind="proxy"),  # not a scheduled resource: not drawn
    ]

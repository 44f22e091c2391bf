"""What `agent run` says and waits for, pass by pass, on the tasks of a published task file (core.passes).

Each pass's mean reward is printed as it ends; once every published pass has ended, the first and the last pass's
means, and the run stops. A pass starts once the one before it ended and the engines serve a newer policy than
they did then (or `patience_s` later): the pool's passes are then its learning curve.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable

import click
import httpx

from seamlessflow.agents.episode import ABORTED, SessionOutcome
from seamlessflow.core.passes import PassPace, PassTally, Published
from seamlessflow.messages import Task


class ServedVersion:
    """The newest policy version the proxy's routable engines serve (its `/healthz`), asked at most once a second;
    the last one known while the proxy does not answer."""

    def __init__(self, proxy_url: str, every_s: float = 1.0):
        self.url, self.every_s = f"{proxy_url.rstrip('/')}/healthz", every_s
        self.version, self.asked = 0, -float("inf")

    def __call__(self) -> int:
        if time.monotonic() - self.asked >= self.every_s:
            self.asked = time.monotonic()
            try:
                engines = httpx.get(self.url, timeout=5).json().get("engines", [])
                self.version = max([int(e["version"]) for e in engines if e.get("healthy")] or [self.version])
            except (httpx.HTTPError, ValueError, KeyError, TypeError):
                pass
        return self.version


class PassReport:
    """Tallies a published task file's passes (`task_done`) and paces them (`may_start`); `spent` is called once
    every pass ended (None: keep running)."""

    def __init__(self, spent: Callable[[], None] | None, version: Callable[[], int] = lambda: 0,
                 echo: Callable[[str], None] = click.echo, patience_s: float = 120.0,
                 clock: Callable[[], float] = time.monotonic):
        self.tally = PassTally()
        self.pace = PassPace(self.tally, patience_s)
        self.spent, self.version, self.echo, self.clock = spent, version, echo, clock
        self.held: set[int] = set()  # passes whose wait was told

    def task_done(self, task: Task, outcomes: list[SessionOutcome]) -> None:
        published = Published.of(json.loads(task.payload_json))
        if published is None:  # not from a task file (a task source's): no passes to tell
            return
        rewards = [o.reward for o in outcomes if o.status != ABORTED]  # an aborted session runs again
        ends = self.tally.add(task.task_id, published, task.group_size, rewards)
        self.pace.note_ends(ends, self.version(), self.clock())
        for end in ends:
            self.echo(f"pass {end.index + 1}/{end.passes}: mean reward {end.mean_reward:.3f} over "
                      f"{end.sessions} sessions (policy version {self.pace.ended[end.index][0]})")
        if self.tally.spent:
            first, last = self.tally.first_and_last()
            self.echo(f"the {last.passes} published passes are spent: mean reward {first.mean_reward:.3f} in the "
                      f"first, {last.mean_reward:.3f} in the last; `seamlessflow tasks publish` again for more")
            if self.spent is not None:
                self.spent()

    def may_start(self, task: Task) -> bool:
        published = Published.of(json.loads(task.payload_json))
        if published is None:
            return True
        if self.pace.may_start(published.index, self.version(), self.clock()):
            return True
        before = self.pace.ended.get(published.index - 1)
        if before is not None and published.index not in self.held:
            self.held.add(published.index)
            self.echo(f"pass {published.index + 1}/{published.passes} waits for a policy newer than version "
                      f"{before[0]} (at most {self.pace.patience_s:.0f} s)")
        return False

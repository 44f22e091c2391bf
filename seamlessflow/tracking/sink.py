"""The metrics sink: its own consumer of the status, weights and eval records, writing scalars to the
configured trackers (`seamlessflow.tracking.trackers`).

Why a separate service: the trainer's loop publishes a heartbeat and goes on; a slow, broken or unreachable
tracker delays only this process. Offsets are committed after the trackers flushed, so a restarted sink
goes on from there instead of writing every point twice. An eval still waiting for its version's step
(`PointMaker.eval_wait_s`) is written at its version when the sink stops; a crash in that window loses it.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from pathlib import Path

from pydantic import ValidationError

from seamlessflow.config import Settings
from seamlessflow.tracking.follow import Follower
from seamlessflow.tracking.options import TrackingOptions
from seamlessflow.tracking.points import PointMaker
from seamlessflow.tracking.trackers import Trackers

log = logging.getLogger(__name__)


def default_logdir(settings: Settings) -> Path:
    return Path(settings.data_dir).resolve() / "tensorboard" / settings.team / settings.run


def tracking_options(settings: Settings) -> TrackingOptions:
    """The `tracking:` section; a malformed one is reported and the defaults (TensorBoard) used instead."""
    try:
        return TrackingOptions.from_settings(settings)
    except ValidationError as exc:
        log.warning("tracking: configuration not usable, TensorBoard defaults instead: %s", exc)
        return TrackingOptions()


class MetricsSink:
    def __init__(self, settings: Settings, trackers: Trackers | None = None):
        self.settings = settings
        self.options = tracking_options(settings)
        self.trackers = trackers or Trackers.open(self.options, default_logdir(settings),
                                                  f"{settings.team}/{settings.run}")
        group = f"{settings.topic_prefix}.{self.options.group}.{settings.team}.{settings.run}"
        names = ("status", "weights", "session-events") if self.options.pools else ("status", "weights")
        self.follower = Follower(settings, group, names)
        self.maker = PointMaker.for_settings(settings)  # a team's adapter trainer: curves of its own
        self.written = 0

    def step(self) -> int:
        """Reads what arrived, writes its points; returns how many points it wrote."""
        points = [p for incoming in self.follower.poll() for p in self.maker.feed(incoming.message)]
        points += self.maker.overdue(time.monotonic())
        self.trackers.write(points)
        self.written += len(points)
        return len(points)

    def flush(self) -> None:
        self.trackers.flush()
        self.follower.commit()

    def run(self, stop: threading.Event) -> None:
        log.info("metrics sink: %s -> %s", ", ".join(self.follower.topics),
                 ", ".join(t.name for t in self.trackers.trackers) or "no tracker")
        last_flush = time.monotonic()
        try:
            while not stop.is_set():
                self.step()
                if time.monotonic() - last_flush >= self.options.flush_s:
                    self.flush()
                    last_flush = time.monotonic()
        finally:
            self.trackers.write(self.maker.overdue(math.inf))  # evals still waiting: at their version, not lost
            self.flush()
            self.trackers.close()
            self.follower.close()
            log.info("metrics sink stopped after %d points", self.written)


def run_service(settings: Settings, stop: threading.Event) -> None:
    MetricsSink(settings).run(stop)

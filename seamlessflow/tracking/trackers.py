"""Experiment trackers the metrics sink writes to: TensorBoard event files by default, W&B and MLflow when
configured and installed (both can run offline: `wandb: {mode: offline}`, `mlflow: {tracking_uri:
file:...}`).

A tracker that cannot be imported, opened or written to is reported once (one warning with the reason)
and dropped; the others go on. Nothing here can stop training: the sink is its own process, reading what
the trainer already published.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Protocol

from seamlessflow.tracking.options import TrackingOptions
from seamlessflow.tracking.points import Point

log = logging.getLogger(__name__)


class Tracker(Protocol):
    name: str

    def write(self, points: list[Point]) -> None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class TensorBoardTracker:
    name = "tensorboard"

    def __init__(self, logdir: Path):
        from tensorboardX import SummaryWriter

        self.logdir = logdir
        self._writer = SummaryWriter(logdir=str(logdir), flush_secs=5)

    def write(self, points: list[Point]) -> None:
        for p in points:
            self._writer.add_scalar(p.tag, p.value, global_step=p.step, walltime=p.wall_time_s or None)

    def flush(self) -> None:
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class WandbTracker:
    name = "wandb"

    def __init__(self, options: dict[str, Any], run_name: str):
        import wandb

        self._wandb = wandb
        self._run = wandb.init(**{"name": run_name, "mode": "offline", **options})

    def write(self, points: list[Point]) -> None:
        for p in points:
            self._run.log({p.tag: p.value, "step": p.step})

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._run.finish()


class MlflowTracker:
    name = "mlflow"

    def __init__(self, options: dict[str, Any], run_name: str):
        import mlflow

        self._mlflow = mlflow
        if options.get("tracking_uri"):
            mlflow.set_tracking_uri(options["tracking_uri"])
        if options.get("experiment"):
            mlflow.set_experiment(options["experiment"])
        self._run = mlflow.start_run(run_name=run_name)

    def write(self, points: list[Point]) -> None:
        for p in points:
            self._mlflow.log_metric(p.tag.replace("/", "."), p.value, step=p.step)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self._mlflow.end_run()


class Trackers:
    """Fans points out to every tracker that opened; one that fails is reported once and dropped."""

    def __init__(self, trackers: list[Tracker], problems: list[str] | None = None):
        self.trackers = list(trackers)
        self.problems = list(problems or [])

    @classmethod
    def open(cls, options: TrackingOptions, default_logdir: Path, run_name: str) -> Trackers:
        opened: list[Tracker] = []
        problems: list[str] = []
        wanted: list[tuple[str, Any]] = []
        if options.tensorboard:
            wanted.append(("tensorboard", lambda: TensorBoardTracker(Path(options.logdir or default_logdir))))
        if options.wandb is not None:
            wanted.append(("wandb", lambda: WandbTracker(dict(options.wandb or {}), run_name)))
        if options.mlflow is not None:
            wanted.append(("mlflow", lambda: MlflowTracker(dict(options.mlflow or {}), run_name)))
        for name, make in wanted:
            try:
                opened.append(make())
            except Exception as exc:  # not installed, bad options, unreachable server: never fatal
                problems.append(_report(name, "cannot open", exc))
        return cls(opened, problems)

    def write(self, points: list[Point]) -> None:
        if points:
            self._each("write", points)

    def flush(self) -> None:
        self._each("flush")

    def close(self) -> None:
        self._each("close")
        self.trackers = []

    def _each(self, method: str, *args: Any) -> None:
        for tracker in list(self.trackers):
            try:
                getattr(tracker, method)(*args)
            except Exception as exc:
                self.problems.append(_report(tracker.name, f"failed to {method}", exc))
                self.trackers.remove(tracker)


def _report(name: str, what: str, exc: Exception) -> str:
    message = f"tracker {name} {what} ({type(exc).__name__}: {exc}); going on without it"
    log.warning(message)
    return message

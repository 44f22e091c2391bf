"""The metrics sink against the real broker: records published as the services publish them come out as
TensorBoard scalars; a tracker that cannot open or write is reported once and the others go on."""

import threading
import time

from seamlessflow.config import Settings
from seamlessflow.testing.tensorboard_events import scalars
from seamlessflow.testing.tracking_records import create_eval_topic, eval_json, publish_evals, publish_run
from seamlessflow.tracking.options import TrackingOptions
from seamlessflow.tracking.sink import MetricsSink, default_logdir, tracking_options
from seamlessflow.tracking.trackers import Trackers


def run_sink_until(sink, done, timeout_s=30.0):
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline:
        sink.step()
    sink.flush()


def test_sink_writes_reward_eval_and_throughput_scalars(settings, codec):
    create_eval_topic(settings)
    publish_run(settings, codec)
    sink = MetricsSink(settings)
    run_sink_until(sink, lambda: len([p for p in sink.maker.version_steps]) >= 2 and sink.written >= 30)
    sink.trackers.close()
    found = scalars(default_logdir(settings))
    assert found["train/reward_mean"] == [(1, 0.10000000149011612), (2, 0.20000000298023224),
                                          (3, 0.30000001192092896), (4, 0.4000000059604645)]
    assert [step for step, _ in found["eval/accuracy"]] == [2, 4]  # versions 1 and 2, at their steps
    assert [round(v, 3) for _, v in found["eval/accuracy"]] == [0.4, 0.8]
    assert "eval/mean_length" in found and "throughput/rollout_tokens_per_s" in found


def test_a_restarted_sink_goes_on_from_its_committed_offsets(settings, codec):
    publish_run(settings, codec, steps=2)
    first = MetricsSink(settings)
    run_sink_until(first, lambda: first.maker.step >= 2)
    first.run(_stopped())  # closes: flush, commit
    again = MetricsSink(settings)
    for _ in range(10):
        again.step()
    assert again.written == 0


def test_a_broken_tracker_is_reported_once_and_never_stops_the_sink(settings, codec, caplog):
    config = TrackingOptions(wandb={"project": "x"}, mlflow={"tracking_uri": "http://127.0.0.1:9"})
    trackers = Trackers.open(config, default_logdir(settings), "default/default")
    assert [t.name for t in trackers.trackers] == ["tensorboard"]  # wandb and mlflow: not installed here
    assert len(trackers.problems) == 2

    class FailingTracker:  # a tracker whose server went away: every write raises
        name = "failing"
        writes = 0

        def write(self, points):
            FailingTracker.writes += 1
            raise ConnectionError("unreachable")

        flush = close = lambda self: None

    trackers.trackers.append(FailingTracker())
    publish_run(settings, codec, steps=3)
    sink = MetricsSink(settings, trackers=trackers)
    run_sink_until(sink, lambda: sink.maker.step >= 3)
    assert FailingTracker.writes == 1 and len(trackers.problems) == 3
    assert "failing" in trackers.problems[-1] and "going on without it" in trackers.problems[-1]
    sink.trackers.close()
    assert [s for s, _ in scalars(default_logdir(settings))["train/reward_mean"]] == [1, 2, 3]


def test_an_eval_whose_versions_step_never_came_is_written_at_its_version_when_the_sink_stops(settings, codec):
    create_eval_topic(settings)
    publish_run(settings, codec, steps=2)
    publish_evals(settings, [eval_json(9, 0.9, 0.9, 5.0)])  # version 9: no weights record, no heartbeat
    sink = MetricsSink(settings)
    sink.maker.eval_wait_s = 3600.0  # so it is still waiting when the sink stops
    run_sink_until(sink, lambda: sink.maker.step >= 2 and 9 in sink.maker.waiting_evals)
    sink.run(_stopped())
    assert scalars(default_logdir(settings))["eval/accuracy"] == [(2, 0.4000000059604645), (9, 0.8999999761581421)]


def _stopped():
    stop = threading.Event()
    stop.set()
    return stop


def test_a_malformed_tracking_section_falls_back_to_tensorboard(caplog):
    config = tracking_options(Settings().with_overrides(tracking={"tensorboard": "sometimes", "flush_s": "x"}))
    assert config == TrackingOptions()
    assert "configuration not usable" in caplog.text


def run_service_until(sink, done, timeout_s=30.0):
    """The sink's own loop (`run`, what the service runs) in a thread, stopped once `done()`; it must not
    have raised."""
    stop, failures = threading.Event(), []

    def run():
        try:
            sink.run(stop)
        except Exception as exc:  # what would stop the service
            failures.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    deadline = time.monotonic() + timeout_s
    while not done() and time.monotonic() < deadline and thread.is_alive():
        time.sleep(0.1)
    stop.set()
    thread.join(30)
    assert failures == [] and not thread.is_alive()


def test_a_malformed_tracking_section_is_reported_once_and_the_sink_writes_tensorboard(settings, codec, caplog):
    settings = settings.with_overrides(tracking={"flush_s": "soon", "wandb": "yes"})
    publish_run(settings, codec, steps=3)
    sink = MetricsSink(settings)
    run_service_until(sink, lambda: sink.maker.step >= 3)
    assert caplog.text.count("configuration not usable") == 1
    assert [s for s, _ in scalars(default_logdir(settings))["train/reward_mean"]] == [1, 2, 3]


def test_a_tracker_that_cannot_open_is_reported_once_and_the_sink_goes_on(settings, codec, caplog, tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("")  # a logdir under a file: TensorBoard's writer cannot open (NotADirectoryError)
    settings = settings.with_overrides(tracking={"logdir": str(blocked / "tensorboard")})
    publish_run(settings, codec, steps=3)
    sink = MetricsSink(settings)
    assert sink.trackers.trackers == []
    run_service_until(sink, lambda: sink.maker.step >= 3)
    assert sink.maker.step == 3 and sink.written > 0  # read and made every point, with nowhere to write them
    reports = [r.getMessage() for r in caplog.records if "tracker tensorboard" in r.getMessage()]
    assert len(reports) == 1 and "cannot open" in reports[0] and "NotADirectoryError" in reports[0], reports

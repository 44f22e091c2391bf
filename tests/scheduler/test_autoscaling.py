"""The autoscaling policy live in the scheduler: signals from heartbeats, advice with its reason, the cool-down."""

from __future__ import annotations

import logging

import pytest

from seamlessflow.core.policies import PipelineState
from seamlessflow.scheduler.autoscaling import IdleMeter, LiveAutoscaler, capacity
from seamlessflow.scheduler.options import AutoscaleOptions, ManagerOptions, SchedulerOptions
from seamlessflow.scheduler.service import SchedulerService
from seamlessflow.scheduler.view import ClusterView
from seamlessflow.testing.status_records import status

FLEX = ("rollout", "train")
OPTIONS = AutoscaleOptions(enabled=True, min_engines=1, max_engines=4, cooldown_s=60.0)
PIPELINE = PipelineState(buffered=0, batch_threshold=8)


def busy_cluster(v: ClusterView, now: float, queued: float = 300.0, waiting: float = 10.0) -> None:
    """Two serving engines, full and with `waiting` requests queued each; a proxy with `queued` calls waiting."""
    for rid in ("r0", "r1"):
        v.on_status(status(rid, now, "rollout", engine_up=1.0, kv_cache_usage=0.9, requests_waiting=waiting), now)
    v.on_status(status("proxy-0", now, "proxy", kind="proxy", queued=queued, inflight=128.0), now)


def view() -> ClusterView:
    return ClusterView(frozenset({"rollout", "trainer"}))


def test_signals_come_from_the_live_heartbeats():
    v = view()
    v.on_status(status("r0", 0, "rollout", engine_up=1.0, kv_cache_usage=0.5, requests_waiting=3.0), now=0.0)
    v.on_status(status("r1", 0, "rollout", engine_up=0.0), now=0.0)  # its model still loading
    v.on_status(status("r2", 0, "train", tags=FLEX, engine_up=0.0), now=0.0)  # lent to training: not counted
    v.on_status(status("r3", 0, "rollout", "stopped"), now=0.0)  # drained
    v.on_status(status("old", 0, "rollout", engine_up=1.0), now=-20.0)  # silent for longer than the timeout
    v.on_status(status("p0", 0, "proxy", kind="proxy", queued=5.0), now=0.0)
    v.on_status(status("p1", 0, "proxy", kind="proxy", queued=7.0), now=-20.0)  # a proxy no longer heard
    signals, engines = capacity(v, PipelineState(buffered=12, batch_threshold=8), now=1.0, timeout_s=10.0,
                                trainer_idle=0.4)
    assert engines == 2 and signals.engines_starting == 1
    assert (signals.queue_depth, signals.kv_use, signals.waiting_sessions) == ((3,), (0.5,), 5)
    assert (signals.trajectories_waiting, signals.batch_threshold, signals.trainer_idle) == (12, 8, 0.4)


def test_trainer_idle_is_what_its_busy_seconds_did_not_grow():
    meter = IdleMeter(window_s=30.0)
    assert meter.idle("t") is None
    meter.observe("t", 0.0, 100.0)
    meter.observe("t", 0.0, 100.0)  # the same heartbeat at the next tick
    assert meter.idle("t") is None
    meter.observe("t", 10.0, 103.0)
    assert meter.idle("t") == pytest.approx(0.7)
    for at in (20.0, 30.0, 40.0, 50.0):
        meter.observe("t", at, 103.0 + (at - 10.0))  # busy all the time since
    assert meter.idle("t") == 0.0 and meter.samples["t"][0][0] == 20.0  # only the last window counts
    meter.observe("t", 60.0, 1.0)  # restarted: counts again from here
    assert meter.idle("t") is None


def test_the_trainers_idle_share_reaches_the_signals():
    v, scaler = view(), LiveAutoscaler(OPTIONS, heartbeat_timeout_s=10.0)
    v.on_status(status("trainer", 0, "train", kind="trainer", tags=("train",), busy_s=0.0), now=0.0)
    scaler.step(v, PIPELINE, now=0.0)
    v.on_status(status("trainer", 5, "train", kind="trainer", tags=("train",), busy_s=1.0), now=5.0)
    scaler.step(v, PIPELINE, now=5.0)
    assert scaler.signals.trainer_idle == pytest.approx(0.8)
    assert scaler.figures()["autoscale_trainer_idle"] == pytest.approx(0.8)


def test_a_backlog_asks_for_engines_with_its_reason_then_the_cool_down_holds(caplog):
    v, scaler = view(), LiveAutoscaler(OPTIONS, heartbeat_timeout_s=10.0)
    busy_cluster(v, now=0.0)
    assert scaler.step(v, PIPELINE, now=0.0) is None  # warming up: not every heartbeat is in yet
    assert "autoscale_target" not in scaler.figures() and scaler.figures()["autoscale_engines"] == 2
    busy_cluster(v, now=10.0)
    with caplog.at_level(logging.INFO, logger="seamlessflow.scheduler"):
        decision = scaler.step(v, PIPELINE, now=10.0)
        assert decision is not None
        assert (decision.change, decision.target) == (2, 4)  # 320 waiting: 5 engines' worth, up to max 4
        assert decision.reason == "160.0 sessions waiting per engine > 2: +2"
        busy_cluster(v, now=30.0)
        held = scaler.step(v, PIPELINE, now=30.0)
    assert held is not None and held.change == 0 and "cool-down 40 s left" in held.reason
    figures = scaler.figures()
    assert (figures["autoscale_target"], figures["autoscale_change"], figures["autoscale_backlog"]) == (4, 2, 320)
    assert figures["autoscale_kv_use"] == 0.9
    [line] = [r.getMessage() for r in caplog.records if "autoscale" in r.getMessage()]  # logged once
    assert line == ("autoscale (advice only: `seamlessflow scale` carries it out): 2 -> 4 engines: "
                    "160.0 sessions waiting per engine > 2: +2")


def test_the_log_says_who_carries_the_advice_out(caplog):
    acted = LiveAutoscaler(OPTIONS.model_copy(update={"act": True}), heartbeat_timeout_s=10.0)
    v = view()
    for now in (0.0, 10.0):
        busy_cluster(v, now=now)
        with caplog.at_level(logging.INFO, logger="seamlessflow.scheduler"):
            acted.step(v, PIPELINE, now=now)
    [line] = [r.getMessage() for r in caplog.records if "autoscale" in r.getMessage()]
    assert line.startswith("autoscale (advice, carried out by the process holding the stack: "
                           "scheduler.autoscale.act): 2 -> 4 engines: ")


def test_an_advice_acted_on_shows_no_change_and_one_not_is_withdrawn_when_the_load_passes():
    v, scaler = view(), LiveAutoscaler(OPTIONS, heartbeat_timeout_s=10.0)
    busy_cluster(v, now=0.0)
    scaler.step(v, PIPELINE, now=0.0)
    busy_cluster(v, now=10.0)
    scaler.step(v, PIPELINE, now=10.0)
    for rid in ("r2", "r3"):  # an operator ran `scale rollout=+2`: the engines are starting
        v.on_status(status(rid, 20, "rollout", engine_up=0.0), now=20.0)
    busy_cluster(v, now=20.0)
    scaler.step(v, PIPELINE, now=20.0)
    assert (scaler.figures()["autoscale_target"], scaler.figures()["autoscale_change"]) == (4, 0)

    v, scaler = view(), LiveAutoscaler(OPTIONS, heartbeat_timeout_s=10.0)
    busy_cluster(v, now=0.0)
    scaler.step(v, PIPELINE, now=0.0)
    busy_cluster(v, now=10.0)
    scaler.step(v, PIPELINE, now=10.0)  # +2, acted on by nobody
    busy_cluster(v, now=69.0, queued=0.0, waiting=0.0)
    scaler.step(v, PIPELINE, now=69.0)
    assert scaler.target == 4  # the advice stands through its cool-down
    busy_cluster(v, now=71.0, queued=0.0, waiting=0.0)
    decision = scaler.step(v, PIPELINE, now=71.0)
    assert decision is not None and scaler.target == 2 and scaler.figures()["autoscale_change"] == 0


def test_the_service_publishes_the_advice_only_when_enabled(settings, codec, caplog):
    clock = [0.0]
    manager = ManagerOptions(enabled=False)
    enabled = SchedulerOptions(autoscale=OPTIONS)
    service = SchedulerService(settings, enabled, manager, codec, clock=lambda: clock[0])
    disabled = SchedulerService(settings, SchedulerOptions(resource_id="other"), manager, codec, clock=lambda: clock[0])
    with caplog.at_level(logging.INFO, logger="seamlessflow.scheduler"):
        for t in (0.0, 10.0, 20.0):
            clock[0] = t
            for scheduler in (service, disabled):
                for record in (status("r0", t, "rollout", engine_up=1.0, kv_cache_usage=0.9),
                               status("r1", t, "rollout", engine_up=1.0, kv_cache_usage=0.9),
                               status("proxy-0", t, "proxy", kind="proxy", queued=100.0)):
                    scheduler.fold(record)
                scheduler.tick()
    heartbeat = service._status()
    figures = heartbeat.figures
    assert (figures["autoscale_engines"], figures["autoscale_target"], figures["autoscale_change"]) == (2, 4, 2)
    assert heartbeat.note == ("autoscale advice: 2 -> 4 engines (50.0 sessions waiting per engine > 2: +2)")
    assert not any(name.startswith("autoscale") for name in disabled._status().figures)
    assert disabled._status().note is None
    lines = [r.getMessage() for r in caplog.records if "autoscale" in r.getMessage()]
    assert lines == ["autoscale (advice only: `seamlessflow scale` carries it out): 2 -> 4 engines: "
                     "50.0 sessions waiting per engine > 2: +2"]

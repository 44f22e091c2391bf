"""The simulator with elastic capacity (`sim.elastic`): arrivals over time, engines added with a start-up
delay and drained without losing a rollout, and the figures that compare it with a fixed cluster."""

import pytest

from seamlessflow.core.autoscale import ScalingLimits
from seamlessflow.core.timeline import bubble_ratio
from seamlessflow.sim.elastic import ElasticSimulator, simulate_elastic
from seamlessflow.sim.workload import Arrivals, burst_then_lull

LIMITS = ScalingLimits(min_engines=1, max_engines=4)
ARRIVALS = burst_then_lull(peak=2.0, burst_s=300.0, lull_share=0.1)  # 768 tasks take ~20 min


def test_arrivals_follow_their_phases_and_the_last_rate_goes_on():
    arrivals = Arrivals(((10.0, 2.0), (10.0, 0.5)))
    assert [arrivals.arrived(t) for t in (0.0, 5.0, 10.0, 20.0, 30.0)] == [0, 10, 20, 25, 30]
    assert arrivals.seconds == 20.0
    with pytest.raises(ValueError, match="phases"):
        Arrivals(((0.0, 1.0),))


def test_a_fixed_run_holds_every_gpu_and_reports_the_simulators_bubble():
    sim = ElasticSimulator("multiplexed", arrivals=ARRIVALS, limits=None, gpus=8, mix=0.5, steps=3)
    result = sim.elastic_result()
    assert result.decisions == () and result.engines_peak == 8
    assert result.gpu_hours == pytest.approx(8 * result.sim.seconds / 3600)
    assert result.sim.bubble_ratio == pytest.approx(bubble_ratio(sim.intervals, sim.by_id), abs=1e-9)


def test_only_arrived_tasks_are_submitted():
    sim = ElasticSimulator("multiplexed", arrivals=Arrivals(((1.0, 0.5),)), gpus=8, mix=0.5, steps=1)
    sim.run()
    assert sim.ledger.submitted <= sim.arrivals.arrived(sim.now)


def test_the_autoscaler_grows_under_the_burst_and_drains_in_the_lull():
    sim = ElasticSimulator("multiplexed", arrivals=ARRIVALS, limits=LIMITS, gpus=8, mix=0.5, steps=6)
    result = sim.elastic_result()
    ups = [d for d in result.decisions if d.change > 0]
    downs = [d for d in result.decisions if d.change < 0]
    assert ups and downs and ups[0].at < downs[0].at
    assert all("sessions waiting" in d.reason or "trainer idle" in d.reason for d in ups)
    assert all(LIMITS.min_engines <= d.target <= LIMITS.max_engines for d in result.decisions)
    assert result.engines_peak <= 4 + LIMITS.max_engines
    started = {i.kind for i in result.sim.intervals if i.resource_id == "gpu008"}
    assert started >= {"sync", "rollout"}  # starting is loading weights (core.accounting)
    assert result.sim.steps == 6 and sim.trained_tokens > 0


def test_scaling_loses_no_rollout_and_costs_fewer_gpu_hours():
    common = dict(arrivals=ARRIVALS, gpus=8, mix=0.5, steps=6, seed=3)
    fixed = simulate_elastic("multiplexed", limits=None, **common)
    sim = ElasticSimulator("multiplexed", limits=LIMITS, **common)
    scaled = sim.elastic_result()
    assert scaled.gpu_hours < fixed.gpu_hours
    # every rollout submitted is trained, buffered, queued or on an engine: none went with a drained engine
    on_engines = sum(len(e.running) for e in sim.engines)
    assert sim.ledger.accepted == 6 * sim.batch_size + len(sim.buffer)
    assert sim.ledger.running == len(sim.queue) + on_engines
    stopped = [i for i, (_, to) in sim.lives.items() if to >= 0]
    assert stopped and not any(sim.by_id[i].running for i in stopped if i in sim.by_id)


def test_a_drain_past_its_deadline_moves_the_rollouts_with_their_tokens():
    sim = ElasticSimulator("multiplexed", arrivals=ARRIVALS, limits=LIMITS, gpus=8, mix=0.5, steps=1,
                           drain_timeout_s=0.0)
    sim.run()
    engine = next(e for e in sim.engines if e.tags == frozenset({"rollout"}) and e.running)
    running = list(engine.running.values())
    sim._drain(engine)
    sim._settle()
    assert engine not in sim.engines and sim.lives[engine.id][1] == sim.now
    moved = [r for r in running if r in sim.queue or any(r.id in e.running for e in sim.engines)]
    assert len(moved) == len(running) and all(r.remaining < r.length or r.fresh for r in moved)

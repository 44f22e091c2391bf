"""Heterogeneous simulator: roofline maths, mixed workloads, session routing, affinity vs blind."""

import dataclasses
from collections import deque

import numpy as np
import pytest

from seamlessflow.sim.cluster import build_engines, parse_cluster
from seamlessflow.sim.dispatch import HashedDispatch
from seamlessflow.sim.hardware import GPUS, Efficiency, ModelShape, Roofline
from seamlessflow.sim.hetero import compare, mixed_workload, speedup
from seamlessflow.sim.simulated_engine import Rollout
from seamlessflow.sim.workload import Workload

M = ModelShape()
EFF = Efficiency()


def test_prefill_is_compute_bound_at_the_published_flops():
    h100, h20 = Roofline(GPUS["h100"]), Roofline(GPUS["h20"])
    tokens = 1000  # short enough that attention adds only ~1 %
    matmuls = tokens * 2 * M.params / (989e12 * EFF.compute)
    assert h100.prefill_s(tokens) == pytest.approx(matmuls, rel=0.02)
    assert h20.prefill_s(tokens) / h100.prefill_s(tokens) == pytest.approx(989 / 148, rel=1e-6)


def test_decode_is_bandwidth_bound_at_small_batches_and_compute_bound_past_the_ridge():
    h100, h20 = Roofline(GPUS["h100"]), Roofline(GPUS["h20"])
    one = EFF.step_overhead_s + (M.weight_bytes + 1000 * M.kv_bytes_per_token) / (3.35e12 * EFF.bandwidth)
    assert h100.decode_step_s(1, 1000) == pytest.approx(one)
    assert h20.decode_step_s(1, 1000) < h100.decode_step_s(1, 1000)  # 4.0 vs 3.35 TB/s
    # 128 sequences: an H20 (ridge 37 FLOP/byte) is past its ridge, an H100 (295) is not
    flops_128 = 128 * 2 * M.params + M.attention_flops(128 * 2000)
    assert h20.decode_step_s(128, 128 * 2000) == pytest.approx(EFF.step_overhead_s + flops_128 / (148e12 * EFF.compute))
    assert h20.decode_step_s(128, 128 * 2000) > h100.decode_step_s(128, 128 * 2000)


def test_kv_capacity_is_memory_left_after_the_weights():
    h100 = Roofline(GPUS["h100"])
    assert h100.kv_capacity_tokens == pytest.approx((80e9 * 0.9 - M.weight_bytes) / 57344)
    with pytest.raises(ValueError, match="does not fit"):
        Roofline(GPUS["l40s"], ModelShape("70B", 70e9, 80, 8192, 8, 128))


def test_cluster_spec_parses_pools_tags_and_refuses_nonsense():
    pools = parse_cluster("2xh100:train, 3xh20, 1xa100:tags=bandwidth+a100")
    assert [(p.gpu, p.count, p.train) for p in pools] == [("h100", 2, True), ("h20", 3, False), ("a100", 1, False)]
    engines = build_engines(pools, Workload())
    assert [e.id for e in engines][:2] == ["gpu000", "gpu001"] and len(engines) == 6
    assert engines[0].tags == {"rollout", "train"} and engines[2].hardware_tags == {"bandwidth", "h20"}
    assert engines[5].hardware_tags == {"bandwidth", "a100"}
    for bad in ("", "2xv100", "h100", "2xh100:fast"):
        with pytest.raises(ValueError):
            parse_cluster(bad)


def test_mixed_workload_draws_kinds_by_share_and_the_single_kind_draw_is_unchanged():
    tasks = mixed_workload(0.25).sample(np.random.default_rng(0), 4000)
    prefill = [t for t in tasks if t[2] == "prefill"]
    assert 0.22 < len(prefill) / 4000 < 0.28 and {t[0] for t in prefill} == {8192}
    assert max(t[1] for t in prefill) <= 1024 and max(t[1] for t in tasks if t[2] == "decode") <= 16384
    plain = Workload()
    lengths = plain.response_lengths(np.random.default_rng(3), 50).tolist()
    assert plain.sample(np.random.default_rng(3), 50) == [(1024, n, None) for n in lengths]


def test_affinity_dispatch_queues_each_session_for_a_fitting_engine_blind_for_any():
    engines = build_engines(parse_cluster("2xh100,2xh20"), Workload())
    for engine in engines:
        engine.role = "rollout"
    rollouts = [Rollout(i, 100, 50, 50.0, profile="prefill" if i % 2 else "decode") for i in range(40)]
    affinity = HashedDispatch("affinity")
    affinity(deque(rollouts), engines, 0.0)
    for engine in engines:
        profiles = {r.profile for r in engine.running.values()}
        assert profiles == ({"prefill"} if "compute" in engine.hardware_tags else {"decode"})
    blind_engines = build_engines(parse_cluster("2xh100,2xh20"), Workload())
    for engine in blind_engines:
        engine.role = "rollout"
    HashedDispatch("blind")(
        deque(Rollout(i, 100, 50, 50.0, profile=r.profile) for i, r in enumerate(rollouts)), blind_engines, 0.0
    )
    assert all(len({r.profile for r in e.running.values()}) == 2 for e in blind_engines)


def test_on_a_homogeneous_cluster_affinity_is_exactly_blind_hashing():
    runs = compare("4xh100:train,4xh100", steps=2, routings=("affinity", "blind"))
    assert runs[0].result.summary() | {"policy": ""} == runs[1].result.summary() | {"policy": ""}


def test_affinity_beats_blind_on_a_small_rollout_bound_heterogeneous_cluster():
    runs = compare("12xh100:train,2xh100,4xh20", steps=3)
    assert all(r.result.steps == 3 for r in runs)
    assert speedup(runs) > 1.2
    affinity = next(r for r in runs if r.routing == "affinity")
    assert affinity.busy["h100"] < affinity.busy["h20"]  # the honest cost: compute GPUs idle more


def test_a_model_that_does_not_fit_is_a_value_error_naming_it():
    small = dataclasses.replace(GPUS["h100"], name="tiny card", memory_gb=1.0)
    with pytest.raises(ValueError, match=f"{ModelShape().name} does not fit on a tiny card"):
        Roofline(small)  # the default model, as when none is given

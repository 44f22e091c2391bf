"""A heterogeneous cluster for the simulator: pools of one GPU type each, with role and hardware tags.

Written like `8xh100:train,8xh100,16xh20` (count x GPU key from `hardware.GPUS`; `:train` tags the pool
{rollout, train}, else {rollout}; `:tags=a+b` replaces the GPU's default hardware tags). Engines are
numbered in pool order, so `gpu000` is the first GPU of the first pool.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from seamlessflow.core.resources import Tag
from seamlessflow.sim.hardware import GPUS, ModelShape, Roofline
from seamlessflow.sim.simulated_engine import SimEngine
from seamlessflow.sim.workload import Workload

_POOL = re.compile(r"^(\d+)x([a-z0-9]+)((?::[a-z=+0-9_-]+)*)$")


@dataclass(frozen=True)
class Pool:
    gpu: str
    count: int
    train: bool = False
    hardware_tags: frozenset[str] | None = None  # None: the GPU's own (hardware.GPUS)

    @property
    def tags(self) -> frozenset[str]:
        return frozenset({Tag.ROLLOUT, Tag.TRAIN} if self.train else {Tag.ROLLOUT})

    def describe(self) -> str:
        gpu = GPUS[self.gpu]
        hw = ",".join(sorted(self.hardware_tags if self.hardware_tags is not None else gpu.hardware_tags))
        return (f"{self.count} x {gpu.name} ({gpu.bf16_tflops:g} TFLOP/s bf16, {gpu.hbm_tb_s:g} TB/s, "
                f"{gpu.memory_gb:g} GB) tags {'rollout+train' if self.train else 'rollout'} | {hw}")


def parse_cluster(text: str) -> tuple[Pool, ...]:
    pools = []
    for part in (p.strip().lower() for p in text.split(",") if p.strip()):
        match = _POOL.match(part)
        if not match or match.group(2) not in GPUS:
            raise ValueError(f"bad pool {part!r}: write COUNTxGPU[:train][:tags=a+b], GPU one of {', '.join(GPUS)}")
        train, hardware = False, None
        for option in filter(None, match.group(3).split(":")):
            if option == "train":
                train = True
            elif option.startswith("tags="):
                hardware = frozenset(filter(None, option[5:].split("+")))
            else:
                raise ValueError(f"bad pool option {option!r} in {part!r}")
        pools.append(Pool(match.group(2), int(match.group(1)), train, hardware))
    if not pools:
        raise ValueError("an empty cluster")
    return tuple(pools)


def build_engines(pools: tuple[Pool, ...], workload: Workload, model: ModelShape | None = None,
                  all_train: bool = False) -> list[SimEngine]:
    engines, index = [], 0
    for pool in pools:
        gpu = GPUS[pool.gpu]
        cost = Roofline(gpu, model)
        hardware = pool.hardware_tags if pool.hardware_tags is not None else gpu.hardware_tags
        tags = Pool(pool.gpu, 1, True).tags if all_train else pool.tags
        for _ in range(pool.count):
            engines.append(SimEngine(f"gpu{index:03d}", tags, workload, cost, hardware))
            index += 1
    return engines

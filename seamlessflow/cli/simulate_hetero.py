"""`seamlessflow simulate --hetero`: time to N training steps with affinity vs tag-blind routing, side by side."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from seamlessflow.sim.cluster import Pool
from seamlessflow.sim.hardware import Efficiency, ModelShape
from seamlessflow.sim.hetero import RoutingRun, compare, speedup
from seamlessflow.sim.workload import Workload


def report_hetero(pools: tuple[Pool, ...], workload: Workload, steps: int, seed: int, as_json: bool) -> None:
    runs = compare(pools, workload, steps=steps, seed=seed)
    ratio = speedup(runs)
    if as_json:
        click.echo(json.dumps(_as_json(runs, pools, workload, steps, seed, ratio), indent=2))
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)
    eff, model = Efficiency(), ModelShape()
    console.print(f"model {model.name} ({model.params / 1e9:.1f} B, bf16), one engine per GPU; roofline at "
                  f"{eff.compute:.0%} of peak FLOP/s, {eff.bandwidth:.0%} of peak bandwidth")
    for pool in pools:
        console.print(f"  {pool.describe()}")
    for kind in workload.tasks:
        console.print(
            f"  task {kind.name}: {kind.share:.0%}, {kind.profile}-heavy, prompt {kind.prompt_tokens} tokens, "
            f"response median {kind.response_median:g} (cap {kind.response_max})"
        )
    console.print(_table(runs, steps))
    console.print(f"affinity finishes {steps} steps {ratio:.2f}x sooner than tag-blind hashing")


def _table(runs: list[RoutingRun], steps: int) -> Table:
    labels = sorted({label for r in runs for label in r.busy})
    table = Table("routing", f"s to {steps} steps", "trained tok/s", "x blind", *[f"busy {x}" for x in labels],
                  title="disaggregated policy, same task stream; busy = share of time generating or training")
    blind = next((r.seconds for r in runs if r.routing == "blind"), None)
    for r in runs:
        table.add_row(r.routing, f"{r.seconds:,.0f}", f"{r.result.throughput:,.0f}",
                      f"{blind / r.seconds:.2f}" if blind else "-", *[f"{r.busy.get(x, 0.0):.0%}" for x in labels])
    return table


def _as_json(runs: list[RoutingRun], pools: tuple[Pool, ...], workload: Workload, steps: int, seed: int,
             ratio: float) -> dict:
    return {
        "steps": steps,
        "seed": seed,
        "affinity_speedup_vs_blind": round(ratio, 4),
        "cluster": [pool.describe() for pool in pools],
        "tasks": [
            {
                "name": k.name,
                "share": k.share,
                "profile": k.profile,
                "prompt_tokens": k.prompt_tokens,
                "response_median": k.response_median,
                "response_max": k.response_max,
            }
            for k in workload.tasks
        ],
        "routings": {
            r.routing: {**r.result.summary(), "busy": {k: round(v, 4) for k, v in r.busy.items()}} for r in runs
        },
    }

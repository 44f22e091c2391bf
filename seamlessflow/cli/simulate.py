"""`seamlessflow simulate`: the real scheduler policies on a simulated cluster, side by side."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from seamlessflow.cli.simulate_hetero import report_hetero
from seamlessflow.core.policies import POLICIES
from seamlessflow.sim import SimResult
from seamlessflow.sim import simulate as run_simulation
from seamlessflow.sim.cluster import parse_cluster
from seamlessflow.sim.hetero import DEFAULT_CLUSTER, mixed_workload
from seamlessflow.sim.timeline_plot import draw_timelines


@click.command()
@click.option("--gpus", type=click.IntRange(min=2), default=64, show_default=True, help="GPUs in the cluster.")
@click.option(
    "--policy",
    "policies",
    multiple=True,
    type=click.Choice(sorted(POLICIES)),
    help="Policy to run (repeatable; default: all).",
)
@click.option(
    "--mix",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="Share of GPUs tagged {rollout, train}; the rest are {rollout}. Colocated tags all GPUs.",
)
@click.option("--steps", type=click.IntRange(min=1), default=8, show_default=True, help="Training steps per run.")
@click.option(
    "--max-staleness",
    type=click.IntRange(min=0),
    default=None,
    help="Override the policy's staleness bound (default: colocated 0, others 1).",
)
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("--png", type=click.Path(dir_okay=False), default=None, help="Write a timeline PNG of every run.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable figures per policy.")
@click.option(
    "--hetero",
    is_flag=True,
    help="Instead: affinity routing vs tag-blind hashing on a heterogeneous cluster with mixed tasks.",
)
@click.option(
    "--cluster", default=None, help=f"With --hetero: pools, e.g. {DEFAULT_CLUSTER!r} (COUNTxGPU[:train][:tags=a+b])."
)
@click.option(
    "--prefill-share",
    type=click.FloatRange(0.0, 1.0),
    default=0.5,
    show_default=True,
    help="With --hetero: share of tasks that are prefill-heavy (the rest decode-heavy).",
)
def simulate(gpus: int, policies: tuple[str, ...], mix: float, steps: int, max_staleness: int | None, seed: int,
             png: str | None, as_json: bool, hetero: bool, cluster: str | None, prefill_share: float) -> None:
    """Throughput (trained tokens/s), bubble ratio and staleness per policy on a long-tail workload;
    with --hetero, training time with hardware-aware (affinity) vs tag-blind routing."""
    if hetero:
        try:
            pools = parse_cluster(cluster or DEFAULT_CLUSTER)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--cluster") from None
        report_hetero(pools, mixed_workload(prefill_share), steps, seed, as_json)
        return
    results = [
        run_simulation(name, gpus=gpus, mix=mix, steps=steps, seed=seed, max_staleness=max_staleness)
        for name in policies or sorted(POLICIES)
    ]
    if png:
        draw_timelines([(_panel_title(r), r.intervals) for r in results], png)
    if as_json:
        click.echo(json.dumps(_as_json(results, gpus=gpus, mix=mix, steps=steps, seed=seed), indent=2))
        return
    console = Console()
    if not console.is_terminal:
        console = Console(width=120)  # pipes and CliRunner: do not squeeze the table into 80 columns
    console.print(_table(results))
    if png:
        click.echo(f"timeline: {png}")


def _speedups(results: list[SimResult]) -> dict[str, float | None]:
    base = next((r.throughput for r in results if r.policy == "colocated"), None)
    return {r.policy: (r.throughput / base if base else None) for r in results}


def _as_json(results: list[SimResult], **run: object) -> dict:
    speedups = _speedups(results)
    policies = {r.policy: {**r.summary(), "speedup_vs_colocated": speedups[r.policy]} for r in results}
    return {**run, "policies": policies}


def _table(results: list[SimResult]) -> Table:
    speedups = _speedups(results)
    table = Table("policy", "r+t/GPUs", "tok/s", "x coloc", "bubble", "idle", "switch", "stale", "sim s",
                  title="trained tokens/s, bubble (idle + switch/sync), staleness mean/max")
    for r in results:
        speedup = speedups[r.policy]
        table.add_row(
            r.policy, f"{r.train_capable}/{r.gpus}", f"{r.throughput:,.0f}", f"{speedup:.2f}" if speedup else "-",
            f"{r.bubble_ratio:.1%}", f"{r.idle_ratio:.1%}", f"{r.overhead_ratio:.1%}",
            f"{r.staleness_mean:.2f}/{r.staleness_max}", f"{r.seconds:,.0f}",
        )
    return table


def _panel_title(result: SimResult) -> str:
    return (f"{result.policy} ({result.train_capable}/{result.gpus} GPUs tagged rollout+train, "
            f"{result.throughput:,.0f} tok/s)")

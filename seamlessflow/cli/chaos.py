"""`seamlessflow chaos`: faults on a seeded schedule while agents work, then an audit of the topics."""

from __future__ import annotations

import click
from rich.console import Console

from seamlessflow.cli.context import pass_settings, placement_errors
from seamlessflow.config import Settings
from seamlessflow.stack.placement_choice import recorded
from seamlessflow.stack.services import with_stack_defaults
from seamlessflow.stack.supervisor import ServiceSpec

SHORT = {"faults": 4, "every_s": 10.0, "settle_s": 20.0, "concurrency": 4}


@click.command()
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the fault schedule and the agents.")
@click.option("--faults", type=int, default=15, show_default=True, help="Faults to deliver.")
@click.option("--every-s", type=float, default=12.0, show_default=True, help="Mean seconds between faults.")
@click.option(
    "--targets",
    help="Comma-separated services to hit (default: all; NAME+child hits a child, "
    "e.g. rollout-0+child = its engine, trainer+child = a rank).",
)
@click.option(
    "--freeze-share",
    type=float,
    default=0.2,
    show_default=True,
    help="Share of single faults that SIGSTOP instead of kill.",
)
@click.option("--concurrency", type=int, default=8, show_default=True, help="Agent sessions at once.")
@click.option(
    "--settle-s",
    type=float,
    default=30.0,
    show_default=True,
    help="Agents keep working this long after the last fault.",
)
@click.option("--drain-s", type=float, default=90.0, show_default=True, help="Longest wait for the last trajectories.")
@click.option("--recover-within-s", type=float, default=90.0, show_default=True, help="Slower recovery is a violation.")
@click.option(
    "--stub-engines",
    type=int,
    default=0,
    help="Run N stub engines (a source checkout's test fake) instead of rollout workers, scheduler and agent pools.",
)
@click.option(
    "--reward",
    "rewards",
    multiple=True,
    metavar="MODULE:FUNCTION@POOL",
    help="Also run (and hit) a reward worker of POOL scoring with FUNCTION; repeatable.",
)
@click.option("--short", is_flag=True, help=f"The CI variant: {SHORT}.")
@click.option("--attach", is_flag=True, help="Hit the stack `seamlessflow up` runs here instead of starting one.")
@click.option("--json", "as_json", is_flag=True, help="End with one JSON line (faults_injected, violations, ...).")
@pass_settings
def chaos(
    settings: Settings,
    seed: int,
    faults: int,
    every_s: float,
    targets: str | None,
    freeze_share: float,
    concurrency: int,
    settle_s: float,
    drain_s: float,
    recover_within_s: float,
    stub_engines: int,
    rewards: tuple[str, ...],
    short: bool,
    attach: bool,
    as_json: bool,
) -> None:
    """Kill -9 and freeze services on a seeded schedule while agents run sessions, then audit the topics
    (every acknowledged call recorded once, every ended session's leaves assembled bit-exact, nothing
    trained twice, versions only increasing, poison dead-lettered). Exits 1 on any violation."""
    from seamlessflow.chaos.config import ChaosConfig
    from seamlessflow.chaos.report import json_line, render
    from seamlessflow.chaos.run import run_chaos
    from seamlessflow.chaos.stack import reward_worker_specs, stub_engine_stack

    options = ChaosConfig(
        seed=seed,
        faults=faults,
        every_s=every_s,
        freeze_share=freeze_share,
        targets=tuple(t.strip() for t in targets.split(",")) if targets else (),
        concurrency=concurrency,
        settle_s=settle_s,
        drain_s=drain_s,
        recover_within_s=recover_within_s,
    )
    if short:
        options = ChaosConfig(**{**vars(options), **SHORT})
    settings = with_stack_defaults(settings)
    stack = recorded(settings)
    busy = stack.running()
    if attach != bool(busy):
        raise click.ClickException("--attach needs a running stack here" if attach
                                   else f"a stack already runs here {busy}: `seamlessflow down` first, or --attach")
    if stack.without_holder():
        raise click.ClickException("a stack without its supervisor runs here: `seamlessflow up` adopts it, "
                                   "`seamlessflow down` stops it")
    extra: list[ServiceSpec] = []
    if stub_engines:
        settings, extra = stub_engine_stack(settings, stub_engines, options.group_size)
    console = Console(width=160)
    late = reward_worker_specs(settings, list(rewards))
    if attach and late:
        raise click.ClickException("--reward starts workers: not with --attach")
    with placement_errors():  # faults by pid reach no stack placed on Ray
        result = run_chaos(settings, options, extra, attach=attach, log=console.print, late=late)
    render(result, console)
    if as_json:
        click.echo(json_line(result))
    if not result.ok:
        raise SystemExit(1)

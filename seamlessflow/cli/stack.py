"""`seamlessflow up`, `down`, `status` and `scale`: the one-command stack, on this machine or on a Ray cluster
(`up --ray ADDRESS`, or `cluster: {engine: ray}`).

Whichever placement runs the stack (`stack.placement_choice`), `down`, `status` and `scale` find it by what its run
directory recorded. On Ray the services are detached actors, so the stack outlives the `up` that started it: with
--detach `up` returns once every service is ready, in the foreground it follows them until Ctrl-C or SIGTERM.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable

import click
from rich.console import Console, Group
from rich.live import Live

from seamlessflow.cli.context import data_only_stdout, pass_settings, placement_errors
from seamlessflow.cli.foreground import held_until_stopped
from seamlessflow.cli.status_view import adapter_trainer_teams, render_status
from seamlessflow.config import Settings
from seamlessflow.scheduler.options import SchedulerOptions
from seamlessflow.stack.adoption import take_over
from seamlessflow.stack.options import ClusterOptions
from seamlessflow.stack.paths import config_path, log_dir, run_dir
from seamlessflow.stack.placement_choice import placement_for, recorded
from seamlessflow.stack.placement_protocol import Placement
from seamlessflow.stack.processes import STACK_ENV
from seamlessflow.stack.scale import AdviceActor, parse_change, reconcile, scale_stack
from seamlessflow.stack.scale_edits import split_role
from seamlessflow.stack.services import SERVICES, start_stack, with_stack_defaults
from seamlessflow.stack.status import stack_status
from seamlessflow.stack.supervisor import ServiceState, Supervisor, read_state
from seamlessflow.stack.watch import ResourceWatcher


@click.command()
@click.option("--detach", is_flag=True, help="Return once the stack is healthy; stop it with `seamlessflow down`.")
@click.option("--wait-s", type=float, default=1800.0, show_default=True, help="With --detach: how long to wait.")
@click.option("--policy", type=click.Choice(["colocated", "disaggregated", "multiplexed"]),
              help="Placement policy of the tag scheduler (default: multiplexed).")
@click.option("--only-broker", is_flag=True, help="Start just the broker and topics (no model, no services).")
@click.option("--brokers", type=click.IntRange(1, 9),
              help="Embedded KRaft nodes (3: replication factor 3, min.insync.replicas 2); default 1.")
@click.option("--generation", help="Join this start of the stack instead of drawing a new one (with --only on "
                                   "another node: the generation `status` shows on the first).")
@click.option("--only", "only", multiple=True, type=click.Choice(SERVICES),
              help="Start just these services (repeatable), e.g. `--only trainer` on another node of a "
                   "multi-node trainer, with --bootstrap-servers pointing at the cluster.")
@click.option("--ray", "ray_address", metavar="HOST:PORT",
              help="Place the services on this Ray cluster (its head's GCS address) instead of this machine.")
@click.option("--no-demo", is_flag=True, help="Leave the calculator demo out (its tasks, agent pool and eval): the "
              "trainer trains on your own pools alone (`seamlessflow init`, then the command it prints).")
@pass_settings
def up(settings: Settings, detach: bool, wait_s: float, policy: str | None, only_broker: bool, brokers: int | None,
       generation: str | None, only: tuple[str, ...], ray_address: str | None, no_demo: bool) -> None:
    """Start the stack: embedded broker (unless --bootstrap-servers), topics, and the RL loop's services."""
    settings = with_stack_defaults(settings).with_overrides(brokers=brokers,
                                                            generation=generation or new_generation())
    if no_demo:
        settings = without_demo(settings)
    if ray_address:
        settings = settings.with_overrides(cluster={"engine": "ray", "address": ray_address})
    if policy:
        settings = settings.with_overrides(scheduler={"policy": policy})
    if only_broker or only:
        settings = settings.with_overrides(services={name: name in only for name in SERVICES})
    stack = recorded(settings)
    if busy := stack.running():  # a detached stack on Ray outlives its `up`, by design
        raise click.ClickException(f"already running {busy}; `seamlessflow down` first")
    # one whose supervisor was killed is adopted or stopped first (in the detached supervisor again: the same)
    settings, adopt = take_over(stack, settings, click.echo)
    if ClusterOptions.from_settings(settings).engine == "ray":
        up_on_ray(settings, detach)
    elif detach:
        _up_detached(settings, wait_s)
    else:
        _up_foreground(settings, adopt)


def without_demo(settings: Settings) -> Settings:
    """No task source publishing, no agent pool of the stack's own and no eval of the demo's set: what the
    trainer trains on is what your own pools run."""
    return settings.with_overrides(manager={"enabled": False}, agent_pools=[],
                                   services={"agents": False, "eval": False})


def new_generation() -> str:
    """A new start of the stack: readable (when) and unique (a random tail), see `Settings.generation`."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"


def _up_foreground(settings: Settings, adopt: dict[str, dict]) -> None:
    console = Console() if sys.stdout.isatty() else Console(width=160)  # logs: no wrapping at 80 columns
    placement, settings = placement_for(settings, console.print, adopt)
    assert isinstance(placement, Supervisor)  # this machine's: Ray's stack is `up_on_ray`'s
    reload = threading.Event()  # `scale` changed the effective config: SIGUSR1 (before any start: never fatal)
    signal.signal(signal.SIGUSR1, lambda *_: reload.set())
    with held_until_stopped(console, placement.stop_all):
        start_stack(settings, placement, log=console.print)
        _print_ready(console, placement.info, settings)
        watcher = ResourceWatcher(settings)
        adapters = adapter_trainer_teams(settings)  # which trainer row trains whose adapter
        def view(rows: list[dict]) -> Group:
            return render_status(stack_status(settings, rows), watcher.rewards, adapters)

        actor = advice_actor(settings, AdviceActor.on_this_machine(config_path(settings), placement, console.print),
                             console.print)
        with Live(view(watcher.rows()), console=console, auto_refresh=False, redirect_stdout=False) as live:
            last_print = 0.0
            while True:
                placement.check()
                if reload.is_set():
                    reload.clear()
                    reconcile(config_path(settings), placement, console.print)
                printing = console.is_terminal or time.monotonic() - last_print > 30  # logs: every 30 s
                rows = watcher.rows() if printing or actor is not None else []  # read once a turn
                if actor is not None:
                    actor.step(rows, time.time())
                if console.is_terminal:
                    live.update(view(rows), refresh=True)
                elif printing:
                    console.print(view(rows))
                    last_print = time.monotonic()
                time.sleep(1.0)


def up_on_ray(settings: Settings, detach: bool) -> None:
    """The services as detached actors: with --detach this returns once every one is ready, in the foreground
    it follows their states until Ctrl-C or SIGTERM and then stops them."""
    console = Console(width=160)
    with placement_errors():
        placement, settings = placement_for(settings, console.print)
    detached = False
    with held_until_stopped(console, placement.stop_all, keep=lambda: detached):
        with placement_errors():
            start_stack(settings, placement, log=console.print)
        placement.check()
        _proxy_on_its_node(placement)
        _print_ready(console, placement.info, settings)
        for name, state in placement.states.items():
            console.print(_where(name, state))
        actor = advice_actor(settings, AdviceActor.on_ray(config_path(settings), placement), console.print)
        if detach:
            if actor is not None:
                console.print("scheduler.autoscale.act: a detached stack on Ray only advises (`status` shows the "
                              "advice); `up --ray` in the foreground carries it out, or `scale` by hand")
            detached = True
            return
        watcher = ResourceWatcher(settings) if actor is not None else None
        while True:
            placement.check()
            if actor is not None and watcher is not None:
                actor.step(watcher.rows(), time.time())
            time.sleep(2.0)


def advice_actor(settings: Settings, carry_out: Callable[[int], object],
                 say: Callable[[str], None]) -> AdviceActor | None:
    """The autoscaler's hands where `scheduler.autoscale.act` is set, within its engine limits (one at least)."""
    autoscale = SchedulerOptions.from_settings(settings).autoscale
    if not autoscale.act:
        return None
    return AdviceActor(config_path(settings), carry_out, say,
                       engines=(max(1, autoscale.min_engines), autoscale.max_engines))


def _proxy_on_its_node(placement: Placement) -> None:
    """A proxy listening on every address (`proxy.host: 0.0.0.0`) is shown at its node's address."""
    proxy = next((s for name, s in placement.states.items() if name.split("-")[0] == "proxy"), None)
    url = placement.info.get("proxy", "")
    if proxy is not None and proxy.node_ip and url.startswith("http://0.0.0.0:"):
        placement.info["proxy"] = url.replace("0.0.0.0", proxy.node_ip, 1)
        placement.write_state()


def _where(name: str, state: ServiceState) -> str:
    return f"  {name}: {state.state} on {state.host} ({state.node_ip}), pid {state.pid}"


def _up_detached(settings: Settings, wait_s: float) -> None:
    path = settings.dump_yaml(config_path(settings))
    logs = log_dir(settings)
    logs.mkdir(parents=True, exist_ok=True)
    out = open(logs / "supervisor.log", "ab")
    argv = [sys.executable, "-m", "seamlessflow", "--config", str(path), "up", "--generation", settings.generation]
    proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                            start_new_session=True, env={**os.environ, STACK_ENV: str(run_dir(settings).resolve())})
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        state = read_state(run_dir(settings)) or {}
        if state.get("supervisor_pid") == proc.pid and state.get("ready"):
            _print_ready(Console(), state.get("info", {}), settings)
            click.echo(f"supervisor pid {proc.pid}; logs in {logs}; stop with `seamlessflow down`")
            return
        if proc.poll() is not None:
            raise click.ClickException(f"the stack did not start; see {logs / 'supervisor.log'}")
        time.sleep(0.5)
    raise click.ClickException(f"the stack was not ready within {wait_s:.0f} s{_awaited(state)}; it is still "
                               f"starting (see {logs}); `seamlessflow down` stops it")


def _awaited(state: dict) -> str:
    waits = [f"{name}: {svc['waiting_for']}" for name, svc in (state.get("services") or {}).items()
             if svc.get("waiting_for")]
    return f" (waiting for {'; '.join(waits)})" if waits else ""


def _print_ready(console: Console, info: dict, settings: Settings) -> None:
    console.print(f"[green]SeamlessFlow is up[/green]  Kafka: {info.get('bootstrap_servers')}  "
                  f"topics: {info.get('topic_prefix')}.*  data: {os.path.abspath(settings.data_dir)}")
    for key, value in info.items():
        if key not in ("bootstrap_servers", "topic_prefix"):
            console.print(f"  {key}: {value}")


@click.command()
@pass_settings
def down(settings: Settings) -> None:
    """Stop the stack: SIGTERM, then SIGKILL after the grace period; no process is left behind, whatever
    state `up` reached (every process of the stack carries its run directory: see `processes.stack_processes`)."""
    click.echo("stopped" if recorded(settings).stop(click.echo) else "nothing is running here")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_settings
def status(settings: Settings, as_json: bool) -> None:
    """Services, their processes and restarts, and the broker."""
    if as_json:
        with data_only_stdout() as out:
            out.write(json.dumps(stack_status(settings), indent=2) + "\n")
    else:
        Console().print(render_status(stack_status(settings), adapters=adapter_trainer_teams(settings)))


@click.command()
@click.argument("change", metavar="ROLE=+N|ROLE=-N")
@click.option("--engine", "engines", multiple=True, metavar="ID",
              help="With rollout=-N: drain these N engines (e.g. rollout-3, one on a node to be reclaimed) "
                   "instead of the newest. Repeat for several.")
@pass_settings
def scale(settings: Settings, change: str, engines: tuple[str, ...]) -> None:
    """Add or remove engines, assembler workers or agent workers of a running stack; nothing else restarts.

    `scale rollout=+1`: one more engine, placed by Ray where there is room (a node that just joined), or started
    by this machine's supervisor, serving as soon as it is up. `scale rollout=-1`: the newest engine leaves
    routing (its calls in flight continue on the others), stops, and frees its resources;
    `scale rollout=-1 --engine rollout-3` drains that one.

    `scale assembler=+1|-1` changes `assembler.workers` (on Ray, the new worker is placed by the role's
    resources): a worker joins or leaves the assembler's consumer group, whose partitions rebalance (nothing is
    assembled twice).
    `scale agents=+1|-1` (`agents:<team>-<pool>=+1` when there are several pools) changes the pool's
    `agent_pools[].workers`: a drained worker finishes its running tasks within `agents.revoke_grace_s` and
    hands the others back to the pool. One of each always stays; the newest go first."""
    try:
        role, count = parse_change(change)
        split_role(role)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="ROLE=+N") from None
    console = Console(width=160)
    with placement_errors():
        try:
            changed = scale_stack(settings, count, console.print, role, engines)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="ROLE=-N") from None
    for name, service in changed.items():
        console.print(_where(name, service) if count > 0 else f"{name}: drained and stopped")

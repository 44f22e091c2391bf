"""`seamlessflow up`, `down` and `status`: the one-command stack."""

from __future__ import annotations

import json
import os
import secrets
import signal
import subprocess
import sys
import time

import click
from rich.console import Console
from rich.live import Live

from seamlessflow.cli.context import pass_settings
from seamlessflow.cli.foreground import held_until_stopped
from seamlessflow.cli.stack_ray import down_on_ray, up_on_ray
from seamlessflow.cli.status_view import render_status
from seamlessflow.config import Settings
from seamlessflow.stack.options import ClusterOptions
from seamlessflow.stack.services import SERVICES, config_path, log_dir, run_dir, start_stack, with_stack_defaults
from seamlessflow.stack.status import ray_services, stack_status
from seamlessflow.stack.supervisor import (
    STACK_ENV,
    Supervisor,
    pid_alive,
    read_state,
    stack_processes,
    stop_tree,
)
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
@pass_settings
def up(settings: Settings, detach: bool, wait_s: float, policy: str | None, only_broker: bool, brokers: int | None,
       generation: str | None, only: tuple[str, ...], ray_address: str | None) -> None:
    """Start the stack: embedded broker (unless --bootstrap-servers), topics, and the RL loop's services."""
    settings = with_stack_defaults(settings).with_overrides(brokers=brokers,
                                                            generation=generation or new_generation())
    if ray_address:
        settings = settings.with_overrides(cluster={"engine": "ray", "address": ray_address})
    if policy:
        settings = settings.with_overrides(scheduler={"policy": policy})
    if only_broker or only:
        settings = settings.with_overrides(services={name: name in only for name in SERVICES})
    state = read_state(run_dir(settings))
    if state and pid_alive(state.get("supervisor_pid")):
        raise click.ClickException(
            f"already running (supervisor pid {state['supervisor_pid']}); `seamlessflow down` first"
        )
    if state and state.get("placement") and ray_services(state)[0]:  # a detached stack outlives its `up`
        raise click.ClickException(f"already running on Ray ({state['placement']['address']}, namespace "
                                   f"{state['placement']['namespace']}); `seamlessflow down` first")
    if ClusterOptions.from_settings(settings).engine == "ray":
        up_on_ray(settings, detach, _print_ready)
    elif detach:
        _up_detached(settings, wait_s)
    else:
        _up_foreground(settings)


def new_generation() -> str:
    """A new start of the stack: readable (when) and unique (a random tail), see `Settings.generation`."""
    return f"{time.strftime('%Y%m%dT%H%M%S')}-{secrets.token_hex(3)}"


def _up_foreground(settings: Settings) -> None:
    console = Console() if sys.stdout.isatty() else Console(width=160)  # logs: no wrapping at 80 columns
    supervisor = Supervisor(run_dir(settings), log_dir(settings), settings.stop_grace_s, say=console.print)
    with held_until_stopped(console, supervisor.stop_all):
        start_stack(settings, supervisor, log=console.print)
        _print_ready(console, supervisor.info, settings)
        watcher = ResourceWatcher(settings)
        view = lambda: render_status(stack_status(settings, watcher.rows()), watcher.rewards)  # noqa: E731
        with Live(view(), console=console, auto_refresh=False, redirect_stdout=False) as live:
            last_print = 0.0
            while True:
                supervisor.check()
                if console.is_terminal:
                    live.update(view(), refresh=True)
                elif time.monotonic() - last_print > 30:  # logs: a table every 30 s, not a redraw
                    console.print(view())
                    last_print = time.monotonic()
                time.sleep(1.0)


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
    state `up` reached (every process of the stack carries its run directory: see `supervisor.stack_processes`)."""
    state = read_state(run_dir(settings))
    if state and state.get("placement"):
        down_on_ray(settings, state)
        click.echo("stopped")
        return
    leftovers = stack_processes(run_dir(settings))
    if not state and not leftovers:
        click.echo("nothing is running here")
        return
    sup = (state or {}).get("supervisor_pid")
    services = (state or {}).get("services", {})
    if pid_alive(sup):
        os.kill(sup, signal.SIGTERM)  # type: ignore[arg-type]  # alive: a pid, not None
        deadline = time.monotonic() + settings.stop_grace_s * (len(services) + 1) + 5
        while pid_alive(sup) and time.monotonic() < deadline:
            time.sleep(0.2)
        if pid_alive(sup):
            os.kill(sup, signal.SIGKILL)  # type: ignore[arg-type]  # alive: a pid, not None
    for svc in services.values():  # anything the supervisor could not stop (it was killed, say)
        if pid_alive(svc.get("pid")):
            stop_tree(svc["pid"], settings.stop_grace_s)
    for proc in stack_processes(run_dir(settings)):  # started but never listed, or re-parented to init
        stop_tree(proc.pid, settings.stop_grace_s)
    click.echo("stopped")


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
@pass_settings
def status(settings: Settings, as_json: bool) -> None:
    """Services, their processes and restarts, and the broker."""
    data = stack_status(settings)
    if as_json:
        click.echo(json.dumps(data, indent=2))
    else:
        Console().print(render_status(data))

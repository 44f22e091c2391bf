"""`up`, `down` and `status` for a stack placed on a Ray cluster (`up --ray ADDRESS`, or `cluster: {engine: ray}`).

The services are detached actors, so the stack outlives the `up` that started it: with `--detach` it returns
once every service is ready, in the foreground it follows their states until Ctrl-C or SIGTERM and then stops
them. Either way `down` (another process) finds the actors by the namespace recorded in the run directory.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import click
from rich.console import Console

from seamlessflow.cli.context import pass_settings
from seamlessflow.cli.foreground import held_until_stopped
from seamlessflow.config import Settings
from seamlessflow.stack.options import ClusterOptions
from seamlessflow.stack.placement import PlacementError
from seamlessflow.stack.ray_placement import RayPlacement, namespace_for, stop_actors
from seamlessflow.stack.scale import parse_change, scale_engines
from seamlessflow.stack.services import config_path, run_dir, start_stack
from seamlessflow.stack.supervisor import pid_alive, read_state, stack_processes, stop_tree
from seamlessflow.teams import TeamKeys


def for_the_cluster(settings: Settings, driver_ip: str) -> Settings:
    """What changes when the services run on other hosts: the embedded broker listens on the driver's node
    address (unless a `broker_host` was given), the default team's key travels in the config (each node's
    data directory is its own, so the key file is not there), and servers left on loopback listen on every
    address (`_reachable`)."""
    if settings.embedded and settings.broker_host == "127.0.0.1":
        settings = settings.with_overrides(broker_host=driver_ip)
    key = TeamKeys.from_settings(settings).ensure_default(settings.team)
    settings = settings.with_overrides(team_keys={settings.team: key, **settings.team_keys})
    return _reachable(settings, driver_ip)


def _reachable(settings: Settings, driver_ip: str) -> Settings:
    """Engines and proxies on loopback listen on every address and announce their node's (the placement tells
    each service its node: `ports.reachable_host`); agents and the eval find a proxy left on the driver's node
    (where `RayPlacement` puts it unless told otherwise) at the driver's address."""
    overrides: dict[str, dict] = {}
    for section in ("rollout", "proxy"):
        if _loopback_host(str(settings.section(section).get("host", "127.0.0.1"))):
            overrides[section] = {"host": "0.0.0.0"}
    proxy = ClusterOptions.from_settings(settings).entry("proxy", "proxy")
    proxy_elsewhere = proxy.node or proxy.custom  # placed by the user's request, not on the driver's node
    for section in ("agents", "eval"):
        url = settings.section(section).get("proxy_url")
        if url and not proxy_elsewhere and _loopback_host(urlsplit(url).hostname or ""):
            overrides[section] = {"proxy_url": url.replace(urlsplit(url).hostname or "", driver_ip, 1)}
    return settings.with_overrides(**overrides) if overrides else settings


def _loopback_host(host: str) -> bool:
    return host in ("127.0.0.1", "localhost")


def up_on_ray(settings: Settings, detach: bool, print_ready: Callable[[Console, dict, Settings], None]) -> None:
    cluster = ClusterOptions.from_settings(settings)
    if not cluster.address:
        raise click.ClickException("cluster.engine is ray but no address: `up --ray HOST:PORT` or cluster.address")
    console = Console(width=160)
    try:
        placement = RayPlacement(cluster.address, namespace_for(settings.generation), run_dir(settings),
                                 cluster.node_data_dir, config_path(settings), settings.stop_grace_s, console.print)
        settings = for_the_cluster(settings, placement.driver_ip)
    except PlacementError as exc:
        raise click.ClickException(str(exc)) from None
    detached = False
    with held_until_stopped(console, placement.stop_all, keep=lambda: detached):
        try:
            start_stack(settings, placement, log=console.print)
        except PlacementError as exc:
            raise click.ClickException(str(exc)) from None
        placement.check()
        _proxy_on_its_node(placement)
        print_ready(console, placement.info, settings)
        for name, state in placement.states.items():
            console.print(f"  {name}: {state.state} on {state.host} ({state.node_ip}), pid {state.pid}")
        if detach:
            detached = True
            return
        while True:
            placement.check()
            time.sleep(2.0)


def _proxy_on_its_node(placement: RayPlacement) -> None:
    """A proxy listening on every address (`proxy.host: 0.0.0.0`) is shown at its node's address."""
    proxy = next((s for name, s in placement.states.items() if name.split("-")[0] == "proxy"), None)
    url = placement.info.get("proxy", "")
    if proxy is not None and proxy.node_ip and url.startswith("http://0.0.0.0:"):
        placement.info["proxy"] = url.replace("0.0.0.0", proxy.node_ip, 1)
        placement.write_state()


def down_on_ray(settings: Settings, state: dict) -> None:
    """Stops the foreground `up` (if any), every actor of the stack's namespace and its process, and what ran
    on this machine outside Ray."""
    placement = state["placement"]
    driver = state.get("supervisor_pid")
    if driver and pid_alive(driver) and driver != os.getpid():
        os.kill(driver, signal.SIGTERM)
        deadline = time.monotonic() + settings.stop_grace_s * (len(state.get("services", {})) + 1) + 5
        while pid_alive(driver) and time.monotonic() < deadline:
            time.sleep(0.2)
    try:
        from seamlessflow.stack.ray_placement import connect

        connect(placement["address"], placement["namespace"])
        stopped = stop_actors(placement["namespace"], None, settings.stop_grace_s)
        click.echo(f"stopped {len(stopped)} actor(s) in namespace {placement['namespace']}")
    except PlacementError as exc:
        click.echo(f"the cluster is gone or unreachable ({exc}); stopping what runs here")
    for proc in stack_processes(run_dir(settings)):
        stop_tree(proc.pid, settings.stop_grace_s)


@click.command()
@click.argument("change", metavar="ROLE=+N")
@pass_settings
def scale(settings: Settings, change: str) -> None:
    """Add services to a running stack placed on Ray, e.g. `scale rollout=+1`: N more engines, placed by Ray
    where there is room (a node that just joined), serving as soon as they are up; nothing restarts."""
    try:
        role, count = parse_change(change)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="ROLE=+N") from None
    if role != "rollout":
        raise click.BadParameter(f"{role!r}: only rollout engines can be added yet (agent pools and assemblers: "
                                 "cluster.resources.<name>.replicas, on the next start)", param_hint="ROLE=+N")
    state = read_state(run_dir(settings))
    if not state or not state.get("placement"):
        raise click.ClickException("no stack placed on Ray runs from this data directory (the local stack runs on "
                                   "one machine: configure rollout.workers and start it again)")
    console = Console(width=160)
    cluster = ClusterOptions.from_settings(settings)
    try:
        placement = RayPlacement.attach(state, run_dir(settings), cluster.node_data_dir, config_path(settings),
                                        settings.stop_grace_s, console.print)
        added = scale_engines(config_path(settings), count, placement.start)
    except PlacementError as exc:
        raise click.ClickException(str(exc)) from None
    for name in added:
        service = placement.states[name]
        console.print(f"  {name}: {service.state} on {service.host} ({service.node_ip}), pid {service.pid}")

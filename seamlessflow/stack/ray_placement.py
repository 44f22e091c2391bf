"""The stack on a Ray cluster: every service a named, detached actor (`service_host.ServiceHost`) that owns its
process, in one namespace per start of the stack (`seamlessflow-<generation>`).

Each actor asks Ray for the spec's resources (CPUs, GPUs, memory, custom resources, a node's resource) and
gets `max_restarts` from its restart policy, so placement and the restart of a lost actor are Ray's; nothing
here places or restarts anything by hand. Before any actor starts, every spec is checked against the nodes
Ray reports: a request no node can give is an error naming the service, what it asked for and what each node
has, never a wait, unless the cluster adds nodes (`cluster.autoscaler`): then it waits as a pending demand, which
Ray's autoscaler meets with a node, for `cluster.node_wait_s` at most. The embedded broker is pinned to the
driver's node (its files were prepared there), and so are the proxy and the dashboard unless configured
elsewhere (agents and users reach them where `up` said).
`state.json` in the run directory records the address and namespace, so `status` and `down` find the actors.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import socket
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seamlessflow.stack import ray_gang
from seamlessflow.stack.placement_protocol import PlacementError, resource_words
from seamlessflow.stack.resources import Resources
from seamlessflow.stack.supervisor import NoNodeJoined, ServiceSpec, ServiceState, StartupFailed, await_ready

NAMESPACE_PREFIX = "seamlessflow-"
ON_THE_DRIVERS_NODE = ("broker", "proxy", "dashboard")
PENDING = "Ray to place it (a node with room for it, or one that joins)"


def placed_by_request(resources: Resources) -> bool:
    """Whether a request already says where a service goes: a node, or a custom resource (which only some nodes
    offer)."""
    return bool(resources.node or resources.custom)


def namespace_for(generation: str) -> str:
    return f"{NAMESPACE_PREFIX}{generation or 'default'}"


def connect(address: str, namespace: str) -> None:
    """Joins the cluster at `address` as a driver; an address nothing answers at is one line, not a hang."""
    import ray

    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host, int(port)), timeout=5):
            pass
    except (OSError, ValueError) as exc:
        raise PlacementError(f"cannot reach the Ray cluster at {address}: {exc}") from None
    if ray.is_initialized():
        ray.shutdown()
    try:
        ray.init(address=address, namespace=namespace, logging_level=logging.WARNING, log_to_driver=False)
    except Exception as exc:  # Ray says why in many ways; the address is what the user can act on
        raise PlacementError(f"cannot join the Ray cluster at {address}: {exc}") from None


def node_table() -> list[dict[str, Any]]:
    """The alive nodes as Ray reports them: address and total resources."""
    import ray

    return [{"ip": n["NodeManagerAddress"], "resources": n["Resources"]} for n in ray.nodes() if n["Alive"]]


def check_feasible(specs: list[ServiceSpec], nodes: list[dict[str, Any]]) -> None:
    """Raises for the first spec that no single node can hold (each spec on its own: whether they all fit at
    once is Ray's to decide, and a service that must wait for a busy node is shown as waiting)."""
    for spec in specs:
        wanted = spec.resources.wanted()
        fitting = sum(_fits(node["resources"], wanted) for node in nodes)
        if fitting < spec.gang:
            have = "; ".join(f"{n['ip']}: {resource_words(n['resources'])}" for n in nodes) or "no alive node"
            if spec.gang == 1:
                raise PlacementError(f"{spec.name} asks for {resource_words(wanted)}, which no node of the cluster has "
                                     f"({have})")
            raise PlacementError(f"{spec.name} asks for {resource_words(wanted)} on each of {spec.gang} nodes, which "
                                 f"only {fitting} node(s) of the cluster have ({have})")


def pack_at_once(specs: list[ServiceSpec], nodes: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Places every spec together, each node's resources counted down (the largest request first, on the first
    node with room left): the node address of each spec's copies (a gang's members on distinct nodes). Raises
    for the first spec left without room. `up` does not ask this (Ray places the actors, and one that waits for
    a busy node is shown as waiting); a deployment's config is checked with it against the nodes its allocation
    gives, since a service that never fits beside the others waits there for ever. First fit is a witness, not
    a proof: it can miss a packing that exists, never report one that does not."""
    free = [{"ip": node["ip"], "resources": dict(node["resources"])} for node in nodes]
    placed: dict[str, list[str]] = {}
    for spec in sorted(specs, key=_size, reverse=True):
        wanted = spec.resources.wanted()
        chosen = [node for node in free if _fits(node["resources"], wanted)][:spec.gang]
        if len(chosen) < spec.gang:
            left = "; ".join(f"{n['ip']}: {resource_words(n['resources'])}" for n in free) or "no alive node"
            raise PlacementError(f"{spec.name} asks for {resource_words(wanted)} on each of {spec.gang} node(s); "
                                 f"beside the services placed before it, {len(chosen)} node(s) have that left ({left})")
        for node in chosen:
            for name, amount in wanted.items():
                node["resources"][name] -= amount
        placed[spec.name] = [node["ip"] for node in chosen]
    return placed


def _fits(have: dict[str, float], wanted: dict[str, float]) -> bool:
    """Whether a node's resources (what it has, or has left) hold a request: every resource it asks for."""
    return all(have.get(name, 0.0) >= amount for name, amount in wanted.items())


def _size(spec: ServiceSpec) -> tuple[float, ...]:
    """The order `pack_at_once` places in: gangs (they need several nodes), then by GPUs, CPUs and memory, so
    the scarcest requests find room before the small ones split it up."""
    r = spec.resources
    return (spec.gang, r.gpus, r.cpus, r.memory_mb)


def actor_options(spec: ServiceSpec, namespace: str) -> dict[str, Any]:
    """The spec's request as Ray actor options (a detached, named actor restarted by Ray's policy)."""
    r = spec.resources
    custom = {k: v for k, v in r.wanted().items() if k not in ("CPU", "GPU", "memory")}
    return {"name": spec.name, "namespace": namespace, "lifetime": "detached", "num_cpus": r.cpus,
            "num_gpus": r.gpus, "memory": r.memory_mb * 2**20 or None, "resources": custom or None,
            "max_restarts": spec.restart.max_restarts, "max_concurrency": 4}


class RayPlacement:
    """Places specs as actors; the same `Placement` interface as the local `Supervisor`."""

    shares_disk = False  # each service has its own node's data_dir: what it needs is built or fetched there

    def __init__(self, address: str, namespace: str, run_dir: Path, node_dir: str, config: Path | None = None,
                 grace_s: float = 10.0, say: Callable[[str], None] = print, keep: dict | None = None,
                 node_wait_s: float | None = None):
        """`node_wait_s`: the cluster adds nodes (`cluster.autoscaler`), and a service that no node present can
        hold waits that long for one; None: such a service is refused at once."""
        self.address, self.namespace, self.run_dir, self.node_dir = address, namespace, run_dir, node_dir
        self.config, self.grace_s, self.say, self.node_wait_s = config, grace_s, say, node_wait_s
        self.info: dict[str, str] = {"ray": f"{address} (namespace {namespace})"}
        self.ready = False
        self.states: dict[str, ServiceState] = {}
        self.actors: dict[str, Any] = {}
        self.driver_ip = ""
        # the process `down` signals: a foreground `up`'s, kept when another process adds services (`scale`)
        self.supervisor_pid = (keep or {}).get("supervisor_pid") or os.getpid()
        connect(address, namespace)
        import ray

        self.driver_ip = ray.util.get_node_ip_address()
        run_dir.mkdir(parents=True, exist_ok=True)
        if keep is not None:
            self._adopt(keep)
        self.write_state()

    @classmethod
    def attach(cls, state: dict, run_dir: Path, node_dir: str, config: Path, grace_s: float = 10.0,
               say: Callable[[str], None] = print, node_wait_s: float | None = None) -> RayPlacement:
        """The placement of a stack already running (`state`: its state.json), to start more services in it
        (`scale`); what it records keeps every service listed there."""
        placement = state["placement"]
        return cls(placement["address"], placement["namespace"], run_dir, node_dir, config, grace_s, say, keep=state,
                   node_wait_s=node_wait_s)

    def _adopt(self, state: dict) -> None:
        """Takes over the services a state file lists (started by another `up` or `scale`)."""
        import ray

        self.info.update(state.get("info") or {})
        self.ready = bool(state.get("ready"))
        for name, recorded in (state.get("services") or {}).items():
            if name in self.actors:
                continue
            try:
                self.actors[name] = ray.get_actor(name, namespace=self.namespace)
            except ValueError:  # stopped meanwhile
                continue
            self.states[name] = state_of(recorded)

    def check_all(self, specs: list[ServiceSpec]) -> None:
        nodes = node_table()  # asked of Ray once for the whole stack
        for spec in specs:
            self._awaits_a_node(self._pinned(spec), nodes)

    def _awaits_a_node(self, spec: ServiceSpec, nodes: list[dict[str, Any]] | None = None) -> bool:
        """Whether no node present (`nodes`, else Ray's now) can hold the spec and it is to wait for one that
        joins (`node_wait_s`, a cluster that adds nodes); raises when none present can and none is awaited. A
        gang is never awaited: its reservation is all or none, at once (`ray_gang`)."""
        try:
            check_feasible([spec], node_table() if nodes is None else nodes)
        except PlacementError as exc:
            if self.node_wait_s is None or spec.gang > 1:
                raise
            self.say(f"{spec.name}: no node present can hold it; it waits up to {self.node_wait_s:.0f} s for a node "
                     f"that joins (cluster.autoscaler): {exc}")
            return True
        return False

    def _pinned(self, spec: ServiceSpec) -> ServiceSpec:
        """The broker runs where its files are, and the proxy and the dashboard where `up` printed them: the
        driver's node, unless `cluster.resources` says where (a node, or a custom resource that picks nodes)."""
        if spec.role == "broker" and not spec.resources.node or (
                spec.role in ON_THE_DRIVERS_NODE and not placed_by_request(spec.resources)):
            resources = dataclasses.replace(spec.resources, node=f"node:{self.driver_ip}")
            return dataclasses.replace(spec, resources=resources)
        return spec

    def start(self, spec: ServiceSpec) -> None:
        """Starts the service's actor (after checking that some node can hold it) and awaits its readiness; a
        gang's members all start in their reserved bundles before any is awaited (`ray_gang`)."""
        if spec.gang > 1:
            self._start_gang(spec)
            return
        spec = self._pinned(spec)
        awaits_a_node = self._awaits_a_node(spec)
        self._await(spec, self._launch(spec, {}), awaits_a_node)
        self.write_state()

    def _start_gang(self, spec: ServiceSpec) -> None:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy


        group, addresses = ray_gang.reserve(spec, node_table())
        members = ray_gang.members(spec, addresses)
        on_node = [self._launch(member, {"scheduling_strategy": PlacementGroupSchedulingStrategy(group, index)})
                   for index, member in enumerate(members)]
        for member, checked_there in zip(members, on_node, strict=True):
            self._await(member, checked_there)
        self.write_state()

    def _launch(self, spec: ServiceSpec, options: dict[str, Any]) -> bool:
        """Creates the service's actor (which starts its process) and lists it before any wait: a `down`
        during the start stops it too. Returns whether its readiness check travelled to its node."""
        import ray

        from seamlessflow.stack.service_host import ServiceHost

        config = self.config.read_text() if self.config and "--config" in spec.argv else None
        ready = spec.ready if _travels(spec.ready) else None  # pickled once: the check asks its node
        host = ray.remote(ServiceHost).options(**actor_options(spec, self.namespace), **options)
        self.actors[spec.name] = host.remote(spec.name, spec.argv, spec.env, config, self.node_dir,
                                             spec.restart.max_restarts, spec.restart.max_backoff_s, ready)
        self.states[spec.name] = ServiceState(spec.name, state="starting")
        self.write_state()
        return ready is not None

    def _await(self, spec: ServiceSpec, on_node: bool, awaits_a_node: bool = False) -> None:
        """Waits for the actor to run its process, then for the readiness check (on the service's node when
        the check can travel there, else here), saying what it waits for; fails when the process died. One
        that awaits a node that joins has `node_wait_s` more, and is removed if none joined by then."""
        import ray

        actor = self.actors[spec.name]
        if awaits_a_node:
            spec = dataclasses.replace(spec, ready_timeout_s=spec.ready_timeout_s + (self.node_wait_s or 0.0))
        since = time.monotonic()

        def still_awaited() -> str:
            self._refresh(spec.name)
            state = self.states[spec.name]
            if state.state == "failed":
                raise StartupFailed(f"{spec.name} failed on {state.node_ip} (exit code {state.exit_code}); see "
                                    f"{state.log} there")
            if not state.pid and awaits_a_node:
                if time.monotonic() - since > (self.node_wait_s or 0.0):
                    self._give_up(spec.name)
                return "a node that can hold it to join (cluster.autoscaler)"
            if not state.pid:
                return "Ray to place it and start its process"
            if spec.ready is None:
                return ""
            return ray.get(actor.awaiting.remote()) if on_node else spec.ready()

        await_ready(spec, self.states[spec.name], still_awaited, self.say, on_change=self.write_state)

    def _give_up(self, name: str) -> None:
        """Removes the actor of a service no node joined for, so its demand does not keep Ray's autoscaler
        asking for a node, and says so."""
        import ray

        ray.kill(self.actors.pop(name), no_restart=True)
        self.states[name].state = "failed"
        self.write_state()
        raise NoNodeJoined(f"{name}: no node that can hold it joined within {self.node_wait_s:.0f} s "
                           f"(cluster.node_wait_s); its actor is removed")

    def _refresh(self, name: str) -> None:
        import ray

        try:
            info = ray.get(self.actors[name].info.remote(), timeout=10)
        except Exception:  # being placed, or restarted by Ray
            self.states[name].state = "restarting" if self.states[name].pid else "pending"
            return
        self.states[name] = state_of(info)

    def check(self) -> None:
        """Refreshes every service's state, those another process added (`scale`) included."""
        from seamlessflow.stack.supervisor import read_state

        self._adopt_added(read_state(self.run_dir) or {})
        for name in self.actors:
            self._refresh(name)
        self.write_state()

    def _adopt_added(self, state: dict) -> None:
        known = set(self.actors)
        added = {name: svc for name, svc in (state.get("services") or {}).items() if name not in known}
        if added:
            self._adopt({"services": added, "info": {}, "ready": self.ready})

    def stop(self, name: str, grace_s: float | None = None) -> None:
        """Stops one service's actor and its process for good (Ray does not restart a killed actor), giving the
        process `grace_s` after SIGTERM (None: the stack's grace)."""
        stop_actors(self.namespace, [name], self.grace_s if grace_s is None else grace_s)
        self.actors.pop(name, None)
        state = self.states.setdefault(name, ServiceState(name))  # one the config named but never started too
        state.state, state.pid = "stopped", None
        self.write_state()

    def stop_all(self) -> None:
        stop_actors(self.namespace, list(reversed(self.actors)), self.grace_s)
        for state in self.states.values():
            state.state, state.pid = "stopped", None
        self.write_state()

    def write_state(self) -> None:
        from dataclasses import asdict

        data = {"supervisor_pid": self.supervisor_pid, "ready": self.ready, "stopping": False, "info": self.info,
                "placement": {"engine": "ray", "address": self.address, "namespace": self.namespace},
                "services": {name: asdict(state) for name, state in self.states.items()}}
        tmp = self.run_dir / "state.tmp"
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.run_dir / "state.json")


def _travels(ready: Any) -> bool:
    """Whether a readiness check can be shipped to the service's node (a check holding a live client cannot)."""
    if ready is None:
        return False
    import ray

    try:
        ray.cloudpickle.dumps(ready)
    except Exception:
        return False
    return True


def state_of(info: dict) -> ServiceState:
    fields = ("name", "pid", "state", "restarts", "exit_code", "started_at", "log", "host", "node_ip")
    known: dict[str, Any] = {k: info[k] for k in fields if k in info}
    return ServiceState(**known)


def stop_actors(namespace: str, names: list[str] | None = None, grace_s: float = 10.0) -> list[str]:
    """Stops the named actors of `namespace` (all of them when `names` is None): each stops its process, then
    is killed for good (no restart). Returns the names stopped."""
    import ray

    if names is None:
        names = [a["name"] for a in ray.util.list_named_actors(all_namespaces=True) if a["namespace"] == namespace]
    for name in names:
        try:
            actor = ray.get_actor(name, namespace=namespace)
        except ValueError:
            continue
        try:
            ray.get(actor.stop.remote(grace_s), timeout=grace_s + 10)
        except Exception:  # a dead or unreachable actor: killing it takes its process (parent-death signal)
            pass
        ray.kill(actor, no_restart=True)

    ray_gang.release(names)
    return names


def actor_states(namespace: str, names: list[str]) -> dict[str, dict]:
    """Each named service's live state as its actor reports it (`status` of a Ray-placed stack)."""
    import ray

    out: dict[str, dict] = {}
    for name in names:
        try:
            actor = ray.get_actor(name, namespace=namespace)
        except ValueError:  # stopped for good, or never created
            out[name] = {"name": name, "state": "gone"}
            continue
        try:
            info: Any = ray.get(actor.info.remote(), timeout=10)
            out[name] = info
        except ray.exceptions.GetTimeoutError:  # not placed yet (no node with room, or one to join)
            out[name] = {"name": name, "state": "pending", "waiting_for": PENDING}
        except Exception:  # dead, and not to be restarted
            out[name] = {"name": name, "state": "gone"}
    return out

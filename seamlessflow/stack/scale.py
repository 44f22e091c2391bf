"""More or fewer engines, assembler workers or agent workers for a running stack, without a restart:
`seamlessflow scale rollout=+N` (or `-N`), `scale assembler=+N`, `scale agents=+N` (`agents:<team>-<pool>=+N`
where there are several pools), and `scale teacher=+N` (each taught team's teacher workers, a consumer group
like the assembler's).

Why it needs nothing but a new service: an engine announces itself on the status topic, where the proxies
discover it and the scheduler takes it into its tables, and a starting rollout worker catches up to the newest
weight version by itself. So adding capacity is adding a rollout worker to the stack's effective config (so a
restarted actor finds its spec) and placing its service; Ray puts it on a node that has what it asks for (a node
that just joined, say). On one machine the supervisor that holds the stack (a foreground `up`, or the one a
detached `up` started) does it: `scale` edits the effective config the same way and sends it SIGUSR1, and it
starts the services of the scalable roles the config names and it does not run, and drains those it runs and
the config no longer names (`reconcile`). With `scheduler.autoscale.act`, that supervisor also carries out the
scheduler's autoscaling advice by itself (`AdviceActor`).

Fewer engines: the placement stops the newest ones the way `down` stops any: the rollout worker takes its
engine out of routing at every proxy first (`RolloutWorker.retire`), so the calls it was generating continue
on the other engines as token-in continuations, exact in tokens and versions as across a weight update; then
its engine stops, its actor ends for good, and Ray has its resources back. The engines leave the effective
config, so nothing starts them again.

Assembler and agent workers are members of one consumer group each (`assembler.workers`,
`agent_pools[].workers`: `scale_edits`): this machine's supervisor reconciles with the edited config, and on Ray
`scale` places the new members or stops the drained ones itself (`change_members_on_ray`). A new member takes
partitions in the rebalance it causes. A drained assembler worker, on SIGTERM, flushes its
outputs, saves its replay end and commits (never past the first event of a session still open), then leaves
the group; the worker that gets its partitions rebuilds those sessions from the commit and publishes nothing
below the replay end (`assembler/book.py`), so nothing is assembled twice. A drained agent worker, on
SIGTERM, stops taking tasks, finishes the running ones for `agents.revoke_grace_s` and commits them, then
leaves the group and forgets the rest in its delivery journal: they are handed back in order, not counted as
a worker's death, so no task's attempt goes up (`AgentWorker.run`). The supervisor gives it that grace plus
the stack's stop grace before SIGKILL (`drain_grace_s`), so the hand-back is done by then. What a drain does
not avoid: a task whose sessions outlast the revoke grace is run again from its start by the worker that gets
it, as after any rebalance (the agent worker's delivery is at-least-once); its unfinished sessions on the
drained worker end with that process.
"""

from __future__ import annotations

import functools
import re
import time
from collections.abc import Callable
from pathlib import Path

import yaml

from seamlessflow.config import Settings
from seamlessflow.stack.metrics_urls import add_metrics_port, drop_metrics_port
from seamlessflow.stack.paths import config_path
from seamlessflow.stack.placement_protocol import Placement, PlacementError
from seamlessflow.stack.scale_edits import SCALABLE, scale_assemblers, scale_pool, scale_teachers, split_role
from seamlessflow.stack.supervisor import NoNodeJoined, ServiceSpec, ServiceState, StartupFailed, Supervisor

ENGINE_ID = re.compile(r"rollout-(\d+)$")
# what is one engine's own and must not be copied into another's spec: its port, its cores, its GPUs
OWN_FIELDS = ("port", "cpus", "gpu")


def added_engines(workers: dict[str, dict], count: int, rollout_only: bool = False) -> dict[str, dict]:
    """`count` new rollout workers after the highest `rollout-<n>`, each like the last configured one (its
    capability and hardware tags, its starting role), without what was that one's own (`OWN_FIELDS`).
    `rollout_only`: capable of rollout alone, as the autoscaler's engines are (one the scheduler could lend to
    training is not the rollout capacity it asked for)."""
    if count < 1:
        raise ValueError("scale adds engines with +N, N >= 1")
    numbers = [int(m.group(1)) for rid in workers if (m := ENGINE_ID.match(rid))]
    template = {k: v for k, v in (workers[list(workers)[-1]] if workers else {}).items() if k not in OWN_FIELDS}
    if rollout_only:
        template["capability_tags"] = ["rollout"]
    first = max(numbers, default=-1) + 1
    return {f"rollout-{first + i}": dict(template) for i in range(count)}


def removed_engines(workers: dict[str, dict], count: int, named: tuple[str, ...] = ()) -> list[str]:
    """The `count` newest engines (highest `rollout-<n>`, what scale-ups added last), or the engines `named`
    (an engine on a node to be reclaimed, say: `count` of them); one always stays."""
    if count < 1 or count >= len(workers):
        raise ValueError(f"scale can remove 1 to {len(workers) - 1} of the {len(workers)} engines (one stays)")
    if named:
        if len(named) != count or len(set(named)) != count:
            raise ValueError(f"rollout=-{count} drains {count} engine(s): name {count} different ones with --engine")
        if unknown := [rid for rid in named if rid not in workers]:
            raise ValueError(f"no engine {', '.join(unknown)} in the stack (it has {', '.join(workers)})")
        return list(named)
    numbered = sorted((int(m.group(1)), rid) for rid in workers if (m := ENGINE_ID.match(rid)))
    if len(numbered) < count:
        raise ValueError(f"only {len(numbered)} engines are named rollout-<n>; stop others with `down`")
    return [rid for _, rid in numbered[-count:]]


def parse_change(change: str) -> tuple[str, int]:
    """`rollout=+2` -> ("rollout", 2); `agents:red-default=-1` -> ("agents:red-default", -1)."""
    role, sep, amount = change.partition("=")
    if not sep or amount[:1] not in "+-" or not amount[1:].isdigit() or int(amount[1:]) == 0:
        raise ValueError(f"{change!r}: write ROLE=+N or ROLE=-N, e.g. rollout=+1")
    return role, int(amount)


def scale_stack(settings: Settings, count: int, say: Callable[[str], None], role: str = "rollout",
                named: tuple[str, ...] = ()) -> dict[str, ServiceState]:
    """Adds `count` services of `role` (`rollout`, `assembler`, `agents[:<team>-<pool>]`) to the stack running
    from this data directory (or removes `-count`: the newest, or the engines `named`), through the placement
    that runs it. Returns each one's state."""
    from seamlessflow.stack.placement_choice import LocalRecord, recorded

    split_role(role)
    if named and (role != "rollout" or count > 0):
        raise ValueError("--engine names engines to drain: only with rollout=-N")
    record = recorded(settings)
    if isinstance(record, LocalRecord):
        holder = record.holder()  # before the edit: no supervisor, nothing to reconcile it
        names = changed_services(config_path(settings), role, count, named)
        return record.scale(holder, names, count > 0, say, scale_timeout_s(settings, role, len(names)))
    if role != "rollout":
        return change_members_on_ray(record.attach(say), config_path(settings), role, count)
    return change_engines_on_ray(record.attach(say), config_path(settings), count, named=named)


def change_members_on_ray(placement: Placement, effective: Path, role: str, count: int) -> dict[str, ServiceState]:
    """`count` more assembler or agent workers placed by Ray (or the `-count` newest drained, each with its drain
    grace, as `reconcile` drains them here): the effective config is edited first, so a restarted actor and a later
    `up` find the count; returns each changed service's state."""
    names = changed_services(effective, role, count)
    settings = read_settings(effective)
    base, _ = split_role(role)
    wanted = wanted_services(settings, [base])
    for index, name in enumerate(names):
        if count > 0:
            spec = wanted[name]()
            add_metrics_port(settings, spec)
            _start_or_forget(placement, effective, role, names[index:], spec)
        else:
            placement.stop(name, drain_grace_s(settings, base))
            drop_metrics_port(settings, name)
    changed = {name: placement.states[name] if count > 0 else placement.states.pop(name) for name in names}
    placement.write_state()
    return changed


def change_engines_on_ray(placement: Placement, effective: Path, count: int, rollout_only: bool = False,
                          named: tuple[str, ...] = ()) -> dict[str, ServiceState]:
    """`count` more engines placed by Ray (or the `-count` newest drained, or those `named`), the effective
    config and the stack's state written to match; returns each changed engine's state."""
    if count > 0:
        added = scale_engines(effective, count, placement, rollout_only)
        changed = {name: placement.states[name] for name in added}
    else:
        drained = drain_engines(effective, -count, placement.stop, named)
        changed = {name: placement.states.pop(name) for name in drained}  # no longer the stack's: `status` omits
    placement.write_state()
    return changed


def scale_timeout_s(settings: Settings, role: str, services: int) -> float:
    """How long `scale` waits for the supervisor: an engine until it serves, a drained agent worker its grace."""
    from seamlessflow.rollout.options import RolloutOptions

    if role == "rollout":
        return RolloutOptions.from_settings(settings).health_timeout_s * services + 60
    return (drain_grace_s(settings, "agents") or 0.0) * services + 60


def drain_engines(effective: Path, count: int, stop: Callable[[str], None], named: tuple[str, ...] = ()) -> list[str]:
    """Stops the `count` newest engines (or those `named`) of the stack whose effective config is `effective`
    through `stop` (a
    placement's: the worker retires its engine from routing before it stops it), then drops them from the
    config and the stack's metrics.json. Returns their resource ids."""
    from seamlessflow.stack.services import rollout_service_name

    settings = read_settings(effective)
    data = yaml.safe_load(effective.read_text()) or {}
    workers = (data.get("rollout") or {}).get("workers") or {}
    gone = removed_engines(workers, count, named)
    for resource_id in gone:
        stop(resource_id)
        drop_metrics_port(settings, rollout_service_name(resource_id))
    data["rollout"]["workers"] = {rid: spec for rid, spec in workers.items() if rid not in gone}
    effective.write_text(yaml.safe_dump(data, sort_keys=False))
    return gone


def scale_engines(effective: Path, count: int, placement: Placement, rollout_only: bool = False) -> list[str]:
    """Adds `count` engines to the stack whose effective config is `effective` (written by `up`) and starts
    each through `placement`, on a /metrics port of its own (`add_metrics_port`). Returns the new resource
    ids."""
    new = edit_engines(effective, count, rollout_only)  # a restarted actor reads its spec from the config
    from seamlessflow.stack.services import rollout_service_name

    settings = read_settings(effective)
    for index, resource_id in enumerate(new):
        spec = rollout_spec(settings, resource_id)
        add_metrics_port(settings, spec)
        _start_or_forget(placement, effective, "rollout", [rollout_service_name(r) for r in new[index:]], spec)
    return new


def _start_or_forget(placement: Placement, effective: Path, role: str, unstarted: list[str],
                     spec: ServiceSpec) -> None:
    """Starts `spec`, the first of the added services still `unstarted`. If no node can hold it (refused at
    once, or a cluster that adds nodes added none in time: `NoNodeJoined`), it and those after it never run: they
    leave the effective config, their /metrics ports and the stack's state, so no later `up` or advice counts
    them or asks for them again."""
    try:
        placement.start(spec)
    except (PlacementError, NoNodeJoined):
        edit_role(effective, role, -len(unstarted))  # the newest: the ones added last
        settings = read_settings(effective)
        for name in unstarted:
            drop_metrics_port(settings, name)
            placement.states.pop(name, None)
        placement.write_state()
        raise


def edit_engines(effective: Path, count: int, rollout_only: bool = False, named: tuple[str, ...] = ()) -> list[str]:
    """Adds `count` rollout workers to the effective config (`-count`: removes the newest, or those `named`);
    returns their ids."""
    data = yaml.safe_load(effective.read_text()) or {}
    workers = data.setdefault("rollout", {}).setdefault("workers", {}) or {}
    if count > 0:
        changed = list(new := added_engines(workers, count, rollout_only))
        data["rollout"]["workers"] = {**workers, **new}
    else:
        changed = removed_engines(workers, -count, named)
        data["rollout"]["workers"] = {rid: spec for rid, spec in workers.items() if rid not in changed}
    effective.write_text(yaml.safe_dump(data, sort_keys=False))
    return changed


def rollout_spec(settings: Settings, resource_id: str) -> ServiceSpec:
    """One rollout worker's service, as `up` starts it: ready once its engine serves."""
    from seamlessflow.rollout.options import RolloutOptions
    from seamlessflow.stack.services import python_service, rollout_service_name, with_requests
    from seamlessflow.stack.watch import engines_up

    rollout = RolloutOptions.from_settings(settings)
    spec = python_service(settings, rollout_service_name(resource_id), "--resource-id", resource_id, module="rollout")
    spec.ready, spec.ready_timeout_s = engines_up(settings, [resource_id]), rollout.health_timeout_s
    return with_requests(settings, [spec], rollout)[0]


def edit_role(effective: Path, role: str, count: int, named: tuple[str, ...] = ()) -> None:
    """Adds `count` services of `role` to the effective config (`-count`: removes the newest, or the engines
    `named`); ValueError when it cannot."""
    base, which = split_role(role)
    if base == "rollout":
        edit_engines(effective, count, named=named)
        return
    data = yaml.safe_load(effective.read_text()) or {}
    if base == "assembler":
        scale_assemblers(data, count)
    elif base == "teacher":
        scale_teachers(data, count)
    else:
        scale_pool(data, which, count, Settings.model_validate(data).team)
    effective.write_text(yaml.safe_dump(data, sort_keys=False))


def changed_services(effective: Path, role: str, count: int, named: tuple[str, ...] = ()) -> list[str]:
    """Edits the effective config (`edit_role`) and returns the services it names more (or no longer)."""
    from seamlessflow.stack.services import enabled

    base, _ = split_role(role)
    settings = read_settings(effective)
    if base != "rollout" and not enabled(settings, base):
        raise ValueError(f"the stack runs no {base} (services.{base} is off in its config)")
    before = wanted_services(settings, [base])
    edit_role(effective, role, count, named)
    after = wanted_services(read_settings(effective), [base])
    return [n for n in after if n not in before] if count > 0 else [n for n in before if n not in after]


def read_settings(effective: Path) -> Settings:
    """The stack's settings as its effective config holds them (no environment over them: `up` wrote it)."""
    return Settings.load(effective, env={})


def wanted_services(settings: Settings, roles: list[str]) -> dict[str, Callable[[], ServiceSpec]]:
    """The services of `roles` the config names, as `up` starts them (replicas expanded), each by name with
    what builds its spec (an engine's builds its readiness check: only for one that is started)."""
    from seamlessflow.stack.placement_protocol import expand_replicas
    from seamlessflow.stack.services import SERVICES, app_services, rollout_service_name

    wanted: dict[str, Callable[[], ServiceSpec]] = {}
    if "rollout" in roles:
        for rid in settings.section("rollout").get("workers") or ["rollout-0"]:
            wanted[rollout_service_name(rid)] = functools.partial(rollout_spec, settings, rid)
    others = [role for role in roles if role != "rollout"]
    if others:
        only = settings.with_overrides(services={name: name in others for name in SERVICES})
        for spec in expand_replicas(app_services(only)):
            wanted[spec.name] = functools.partial(_same, spec)
    return wanted


def _same(spec: ServiceSpec) -> ServiceSpec:
    return spec


def drain_grace_s(settings: Settings, role: str) -> float | None:
    """How long a drained service may take between SIGTERM and SIGKILL (None: the stack's stop grace). An agent
    worker finishes its running tasks for `agents.revoke_grace_s` first and then hands back the rest: it gets
    that and the stop grace, so it is not killed holding tasks (which would count as a worker's death)."""
    from seamlessflow.agents.options import AgentOptions
    from seamlessflow.teacher.options import TeacherOptions

    if role == "teacher":  # its running requests get their revoke grace too, then it commits and leaves
        return TeacherOptions.from_settings(settings).revoke_grace_s + settings.stop_grace_s
    if role != "agents":
        return None
    return AgentOptions.from_settings(settings).revoke_grace_s + settings.stop_grace_s


def reconcile(effective: Path, placement: Supervisor, say: Callable[[str], None]) -> tuple[list[str], list[str]]:
    """What the supervisor does on SIGUSR1: for each scalable role (engines, assembler workers, agent pools'
    workers) that the config runs or the supervisor does, it drains the services it runs that the effective
    config no longer names (a rollout worker retires its engine from routing first), then starts those the
    config names and it has never run (one stopped on purpose stays stopped), each on a /metrics port of its
    own; metrics.json follows both (`metrics_urls`). Returns (started, drained)."""
    settings = read_settings(effective)
    from seamlessflow.stack.services import enabled

    running = {name: spec.role for name, spec in placement.specs.items()
               if spec.role in SCALABLE and placement.states[name].state != "stopped"}
    wanted = wanted_services(settings, [r for r in SCALABLE if enabled(settings, r) or r in running.values()])
    drained = [name for name in running if name not in wanted]
    for name in drained:
        say(f"{name}: draining (no longer in the config)")
        placement.stop(name, drain_grace_s(settings, running[name]))
        placement.states.pop(name, None)
        placement.specs.pop(name, None)
        drop_metrics_port(settings, name)
        say(f"{name}: drained and stopped")
    started = [name for name in wanted if name not in placement.specs]
    for name in started:
        say(f"{name}: starting (added to the config)")
        spec = wanted[name]()
        add_metrics_port(settings, spec)
        try:
            placement.start(spec)
        except StartupFailed as exc:  # it stays the supervisor's: restarted with backoff like any other
            say(f"{name}: {exc}")
    placement.write_state()
    return started, drained


class AdviceActor:
    """`scheduler.autoscale.act`: the process holding the stack (this machine's supervisor, or a foreground
    `up --ray`) carries out the scheduler's standing advice (`autoscale_change` on its heartbeat, the reason in
    its note) through `carry_out` (`on_this_machine`, `on_ray`), as `scale` would. It acts on a heartbeat the
    scheduler sent `settle_s` after the last change was done, so a change is never made twice before the
    scheduler counted the engines it added or drained."""

    def __init__(self, effective: Path, carry_out: Callable[[int], object], say: Callable[[str], None],
                 settle_s: float = 10.0, engines: tuple[int, int] = (1, 8)):
        self.effective, self.carry_out, self.say, self.settle_s = effective, carry_out, say, settle_s
        self.engines = engines  # (min, max) rollout workers the config may hold (`scheduler.autoscale`)
        self.done_at = 0.0  # wall clock: when the last change was finished

    @staticmethod
    def on_this_machine(effective: Path, placement: Supervisor, say: Callable[[str], None]) -> Callable[[int], None]:
        """Edits the effective config and reconciles the supervisor with it (rollout-only engines)."""
        def carry_out(change: int) -> None:
            edit_engines(effective, change, rollout_only=True)
            reconcile(effective, placement, say)
        return carry_out

    @staticmethod
    def on_ray(effective: Path, placement: Placement) -> Callable[[int], object]:
        """Places the added (rollout-only) engines through Ray, or drains the newest, as `scale` on Ray does:
        an engine Ray has no room for waits as a pending demand, which Ray's own autoscaler can meet."""
        return functools.partial(change_engines_on_ray, placement, effective, rollout_only=True)

    def step(self, rows: list[dict], now_s: float) -> int:
        """Acts on the scheduler's row among `rows` (`stack.rows`) if it advises a change; returns the change."""
        row = next((r for r in rows if r["kind"] == "scheduler"), None)
        if row is None or now_s - row["heartbeat_age_s"] < self.done_at + self.settle_s:
            return 0
        change = int(row["figures"].get("autoscale_change", 0))
        if not change:
            return 0
        try:
            self._within_limits(change)
            self.say(f"carrying out {row.get('note') or f'the autoscaler advice {change:+d}'}")
            self.carry_out(change)
        except (ValueError, PlacementError, StartupFailed) as exc:  # outside the limits, the last engine (one
            self.say(f"autoscale advice not carried out: {exc}")  # always stays), or no node could hold it
            self.done_at = now_s
            return 0
        self.done_at = time.time()
        return change

    def _within_limits(self, change: int) -> None:
        """The advice counts the engines serving rollout; the config counts every engine worker. An engine that
        never serves rollout (lent to training, or failing to start) would make the advice ask again and again:
        whatever it asks, the config holds no more than max and no fewer than min engines."""
        workers = ((yaml.safe_load(self.effective.read_text()) or {}).get("rollout") or {}).get("workers") or {}
        low, high = self.engines
        if not low <= len(workers) + change <= high:
            raise ValueError(f"{len(workers)} engines configured, {change:+d} would leave [{low}, {high}] "
                             f"(scheduler.autoscale min_engines, max_engines)")

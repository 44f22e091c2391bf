"""`seamlessflow chaos`: run the loop, deliver a seeded fault schedule while agents work, then audit.

Phases: start the stack under a placement that restarts what dies (or attach to a running one), start
the driver's agents, wait for the first acknowledged call, deliver the faults, let the loop settle, wait for
the zombies (a trainer or scheduler frozen, replaced and woken: `schedule.REPLACE`) to be gone and note them in
the ledger, stop the agents (the driver's and the stack's agent pools), wait until every ended session's
trajectories are on the topic, scored where a session asked a reward worker (or the drain time runs out:
the audit then names what is missing) and, with a trainer, until it
published a version after a fault last hit it, read each stored response the proxy acknowledged back through the
live proxy (`stored.py`: with its own team's key and another team's), stop the services (SIGTERM: the trainer
checkpoints and logs its steps), and audit the topics with the broker still up. Recovery times come from the
same records.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from seamlessflow.chaos.audit import AuditReport, Zombie
from seamlessflow.chaos.collect import audit_topics, read_ledger, rules_for, zombie_line
from seamlessflow.chaos.config import ChaosConfig
from seamlessflow.chaos.driver import Driver, DriverStats
from seamlessflow.chaos.inject import Injected, Injector, SupervisorReplacer
from seamlessflow.chaos.recovery import Recovery, recoveries
from seamlessflow.chaos.schedule import KILL, REPLACE, SINGLE_WRITERS, plan
from seamlessflow.chaos.stored import ReadBack, chaos_keys, check_stored, read_stored
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import read_topic
from seamlessflow.kafka.positions import CommittedOffsets, OffsetLookup
from seamlessflow.messages import EpisodeEnd, TokenIO, Trajectory, WeightVersion
from seamlessflow.proxy import ProxyOptions
from seamlessflow.stack.placement_choice import placement_for, recorded
from seamlessflow.stack.placement_protocol import Placement
from seamlessflow.stack.services import enabled, start_stack
from seamlessflow.stack.supervisor import ServiceSpec, Supervisor
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions


@dataclass
class ChaosResult:
    injected: list[Injected]
    recoveries: list[Recovery]
    audit: AuditReport
    driver: DriverStats
    duration_s: float
    agents_stopped_ms: int = 0  # progress after this cannot be expected (recovery is judged up to it)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.audit.ok


def run_chaos(settings: Settings, options: ChaosConfig, extra: Sequence[ServiceSpec] = (), attach: bool = False,
              log: Callable[[str], None] = print, late: Sequence[ServiceSpec] = ()) -> ChaosResult:
    """`extra` services start before the stack (stub engines), `late` ones after it (they need the broker
    and the stack's config file: reward workers)."""
    started = time.monotonic()
    placement, settings = (None, settings) if attach else placement_for(settings, log)
    pids = recorded(settings).pids  # read afresh for every fault, whoever started the stack
    ticking = threading.Event()
    ticker = threading.Thread(target=_tick, args=(placement, ticking), daemon=True)
    try:
        pids()  # faults land by pid on this machine: where none can (a stack on Ray), this says so before a start
        if placement is not None:
            for spec in extra:
                placement.start(spec)
            start_stack(settings, placement, log=log)
            for spec in late:
                placement.start(spec)
            ticker.start()
        log(f"chaos: stack up after {time.monotonic() - started:.0f} s")
        result = _drive(settings, options, placement, pids, log)
        reading = time.monotonic()
        stored = _read_stored(settings)  # through the live proxy: every fault over, each one recovered from
        log(f"chaos: {len(stored)} stored responses read back in {time.monotonic() - reading:.1f} s")
        if placement is not None:
            _stop_ticking(ticker, ticking)
            _stop_services(placement)
            log(f"chaos: services stopped after {time.monotonic() - started:.0f} s")
        ledger = read_ledger(_ledger_path(settings))
        result.audit = audit_topics(settings, ledger)
        check_stored(stored, result.audit, _last_proxy_kill_ms(result.injected))
        log(f"chaos: audited after {time.monotonic() - started:.0f} s")
        result.recoveries = _recoveries(
            settings, result.injected, ledger_times(_ledger_path(settings)), result.agents_stopped_ms
        )
        _judge_recoveries(result, options)
        result.duration_s = time.monotonic() - started
        return result
    finally:
        if placement is not None:
            _stop_ticking(ticker, ticking)
            placement.stop_all()


def _drive(settings: Settings, options: ChaosConfig, placement: Placement | None,
           pids: Callable[[], dict[str, int | None]], log: Callable[[str], None]) -> ChaosResult:
    proxy = ProxyOptions.from_settings(settings)
    key = chaos_keys(settings)[settings.team]
    path = _ledger_path(settings)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("")
    driver = Driver(f"http://{proxy.host}:{proxy.port}", key, path, options, team=settings.team).start()
    injector = _injector(settings, options, placement, pids)
    targets = list(options.targets) or injector.targets()
    replace = SINGLE_WRITERS if options.replace and injector.replacer is not None else ()
    schedule = plan(options.seed, targets, options.faults, options.every_s, freeze_share=options.freeze_share,
                    replace=replace)
    injected: list[Injected] = []
    try:
        _wait(lambda: driver.stats.calls_acknowledged > 0, options.warmup_s, "the first acknowledged call")
        log(f"chaos: {len(schedule)} faults over {targets}, seed {options.seed}")
        begin = time.monotonic()
        for fault in schedule:
            time.sleep(max(0.0, begin + fault.at_s - time.monotonic()))
            injected.append(injector.deliver(fault))
            log(f"  t+{fault.at_s:6.1f}s  {fault.describe()}  pids {injected[-1].pids}")
        time.sleep(options.settle_s)
        _note_zombies(injector, injected, path, options.drain_s)
    finally:
        driver.stop()
    stopped_ms = int(time.time() * 1000)
    if placement is not None:  # the stack's own agent pools stop too: their last sessions drain with ours
        for name in [n for n in placement.states if n.startswith("agents-")]:
            placement.stop(name)
    log("chaos: agents stopped; waiting for the last trajectories")
    _drain(settings, options.drain_s, _last_hit_ms(injected, "trainer"))
    return ChaosResult(injected, [], AuditReport(), driver.stats, 0.0, stopped_ms)


def _injector(settings: Settings, options: ChaosConfig, placement: Placement | None,
              pids: Callable[[], dict[str, int | None]]) -> Injector:
    """Zombies need a placement that can start a replacement beside a live process: this machine's supervisor."""
    replacer = SupervisorReplacer(placement) if isinstance(placement, Supervisor) else None
    return Injector(pids, options.seed, replacer, lambda name: _committed(settings, name))


def _committed(settings: Settings, name: str) -> dict[int, int]:
    """The trainer's committed offsets on the trajectories topic (what a zombie must not move back); none for
    the scheduler, which commits none."""
    if name != "trainer":
        return {}
    topic = Topics(settings).trajectories
    lookup = OffsetLookup(settings, topic)
    marks = CommittedOffsets(settings, TrainerOptions.from_settings(settings).group_id(settings), topic)
    try:
        return marks.read(lookup.partitions())
    finally:
        lookup.close()
        marks.close()


def _note_zombies(injector: Injector, injected: list[Injected], ledger: Path, wait_s: float) -> None:
    """Waits for the zombies' threads and appends what became of each to the ledger, for the audit; a zombie
    fault whose thread did not finish is written as never replaced (the audit then fails it)."""
    injector.join(injected, wait_s)
    with ledger.open("a") as out:
        for item in injected:
            if item.fault.action == REPLACE and item.delivered:
                zombie = item.zombie or Zombie(item.fault.targets[0], (), item.at_ms, took_over=False)
                out.write(zombie_line(zombie))


def _tick(placement: Placement, done: threading.Event) -> None:
    while not done.is_set():
        placement.check()
        done.wait(0.5)


def _stop_ticking(ticker: threading.Thread, ticking: threading.Event) -> None:
    """Ends the placement's checks before services are stopped on purpose: a check in flight would restart them."""
    ticking.set()
    if ticker.is_alive():
        ticker.join()


def _stop_services(placement: Placement) -> None:
    """Everything but the brokers, newest first, with SIGTERM (the trainer checkpoints on it)."""
    for name in reversed(list(placement.states)):
        if placement.states[name].pid and not name.startswith("broker"):
            placement.stop(name)


def _read_stored(settings: Settings) -> list[ReadBack]:
    """Each stored response in the ledger as the proxy serves it now, to its team's key and to another team's."""
    proxy = ProxyOptions.from_settings(settings)
    return read_stored(f"http://{proxy.host}:{proxy.port}", chaos_keys(settings),
                       read_ledger(_ledger_path(settings)).responses)


def _last_proxy_kill_ms(injected: list[Injected]) -> int:
    """When the proxy was last killed (0: never): what it held in memory only was gone then."""
    return max((i.at_ms for i in injected if i.fault.action == KILL and i.pids.get("proxy")), default=0)


def _ledger_path(settings: Settings) -> Path:
    return Path(settings.data_dir).resolve() / "chaos" / "ledger.jsonl"


def ledger_times(path: Path) -> list[int]:
    import json

    return [json.loads(line)["t_ms"] for line in path.read_text().splitlines() if '"prompt"' in line]


def _drain(settings: Settings, drain_s: float, last_fault_ms: int) -> None:
    """Waits until every session ended on the session-events topic with a call in it (the driver's and the
    stack's agent pools') has a trajectory on the trajectories topic, and, with a trainer in the stack, until
    it has published a version after a fault last hit it: a trainer killed late spends its restart (a DeepSpeed
    start, longer on a loaded machine) before it trains again. Sessions that asked a reward worker get
    there once scored, so the reward workers run until this returns."""
    deadline = time.monotonic() + drain_s
    while time.monotonic() < deadline:
        if all_ended_assembled(settings) and _trained_since(settings, last_fault_ms):
            return
        time.sleep(2.0)


def _last_hit_ms(injected: list[Injected], prefix: str) -> int:
    """When a fault last hit a service named `prefix…` (0: never)."""
    return max((i.at_ms for i in injected if i.delivered and any(t.startswith(prefix) for t in i.pids)), default=0)


def all_ended_assembled(settings: Settings) -> bool:
    """Every session that made a call and ended (an aborted one only when kept) has its trajectory."""
    codec, topics = codec_for(settings), Topics(settings)
    keep_aborted = rules_for(settings).keep_aborted
    called, ended = set(), set()
    for record in read_topic(settings, topics.session_events, codec):
        m = record.message
        if isinstance(m, TokenIO):
            called.add(m.session_id)
        elif isinstance(m, EpisodeEnd) and (keep_aborted or m.status != "aborted"):
            ended.add(m.session_id)
    have = {r.message.session_id for r in read_topic(settings, topics.trajectories, codec)
            if isinstance(r.message, Trajectory)}
    return ended & called <= have


def _trained_since(settings: Settings, since_ms: int) -> bool:
    if not enabled(settings, "trainer"):
        return True
    return any(isinstance(r.message, WeightVersion) and r.timestamp_ms > since_ms
               for r in read_topic(settings, Topics(settings).weights, codec_for(settings)))


def _recoveries(settings: Settings, injected: list[Injected], acks_ms: list[int], end_ms: int) -> list[Recovery]:
    topics, codec = Topics(settings), codec_for(settings)
    trajectories = [r.timestamp_ms for r in read_topic(settings, topics.trajectories, codec)]
    weights = ([(r.timestamp_ms, r.message.version) for r in read_topic(settings, topics.weights, codec)
                if isinstance(r.message, WeightVersion)] if enabled(settings, "trainer") else None)
    return recoveries(injected, end_ms, acks_ms, trajectories, weights)


def _judge_recoveries(result: ChaosResult, options: ChaosConfig) -> None:
    for r in result.recoveries:
        what = f"{r.injected.fault.describe()} at t+{r.injected.fault.at_s:.0f}s"
        if r.unrecovered_s is not None:  # the later fault carries the rest of its recovery
            if r.unrecovered_s > options.recover_within_s:
                result.audit.fail("no recovery", f"{what}: none in the {r.unrecovered_s:.0f} s before the next fault")
        elif r.seconds is not None and r.seconds > options.recover_within_s:
            result.audit.fail("slow recovery", f"{what}: {r.seconds:.1f} s (limit {options.recover_within_s:.0f} s)")
        elif r.seconds is None and r.waited_s >= options.recover_within_s:
            result.audit.fail("no recovery", f"{what}: no progress in the {r.waited_s:.0f} s after it")


def _wait(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError(f"chaos: no {what} within {timeout_s:.0f} s")
        time.sleep(0.5)

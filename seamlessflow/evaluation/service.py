"""The eval service: watches which weight version the engines serve and, every `eval_every` versions, runs
a greedy pass over the task source's eval set through the proxy and publishes an `EvalResult`.

Pinned to a version: the proxy's `/healthz` lists each engine with the version it serves. A pass starts
only when every routable engine serves the same version and the proxy is not paused. A weight update may
still cut through it (passes take seconds, updates come every few seconds on two cores): each session's
end answer says which versions generated it, and the figures are those of the sessions wholly generated
by the version most of them had (`core.evaluation.pin`; `samples` says how many). A pass where no
version generated at least half the sessions is dropped (logged) and run again. Restarting the service
evaluates the served version again (an extra point on the curve, never a wrong one).

Teams' adapters: in a stack that trains them (`trainer.target: adapters`) the base never moves, and each team's
adapter has versions of its own (`WeightVersion.adapter`; `/healthz` lists each engine's `adapter_versions`). The
service then evaluates each team's adapter instead of the base: a pass per team, due when every engine serves a
version of that team's adapter `eval_every` above the team's last one, run with the team's key (the proxy serves
the team's calls with its adapter and labels their tokens with the adapter's version, which pins the pass), its
`EvalResult` naming the team (`team`) and the adapter's version (`version`). Passes run one after another.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

import httpx

from seamlessflow.agents.proxy import ProxyClient
from seamlessflow.agents.start import NoTeamKey, team_key
from seamlessflow.avro import Codec
from seamlessflow.config import Settings
from seamlessflow.core.evaluation import is_due, pin, served_version, summarize
from seamlessflow.evaluation.options import EvalOptions
from seamlessflow.evaluation.runner import eval_task, run_pass
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import EvalResult, new_id, now_ms
from seamlessflow.scheduler.options import ManagerOptions
from seamlessflow.tasks.eval_sets import eval_set
from seamlessflow.topics import Topics
from seamlessflow.trainer.adapter_trainers import adapter_trainers
from seamlessflow.user_code import load_function

log = logging.getLogger("seamlessflow.evaluation")


def proxy_engines(http: httpx.Client, proxy_url: str) -> list[dict] | None:
    """The routable engines behind the proxy as `/healthz` lists them, or None (paused, unreachable)."""
    try:
        health = http.get(f"{proxy_url.rstrip('/')}/healthz").json()
    except (httpx.HTTPError, ValueError):
        return None
    if health.get("paused"):
        return None
    return [e for e in health.get("engines", []) if e["healthy"] and e["announced"]]


def served_by(engines: list[dict], adapter: str | None = None) -> int | None:
    """The version of the base (or of `adapter`) every engine serves, or None while they disagree; an engine that
    lists no version of the adapter serves its first (0), as the proxy labels its tokens."""
    if adapter is None:
        return served_version([e["version"] for e in engines])
    return served_version([int((e.get("adapter_versions") or {}).get(adapter, 0)) for e in engines])


def proxy_version(http: httpx.Client, proxy_url: str, adapter: str | None = None) -> int | None:
    """The version (of the base, or of `adapter`) every routable engine behind the proxy serves, or None (paused,
    mixed, unreachable)."""
    engines = proxy_engines(http, proxy_url)
    return None if engines is None else served_by(engines, adapter)


@dataclass
class EvalTarget:
    """One policy the service evaluates, with the key its sessions use: the base (`adapter` None; the run's team,
    or `eval.team`), or in an adapters stack one team's adapter (the proxy serves the team's key its adapter)."""

    team: str
    adapter: str | None
    key: str
    last_evaluated: int | None = None

    def __str__(self) -> str:
        return f"{self.team}'s adapter {self.adapter}" if self.adapter else f"team {self.team}"


def known_key(settings: Settings, team: str) -> str | None:
    """`team`'s key as an agent pool finds it (`agents.start.team_key`: its key file, else `team_keys`); None."""
    try:
        return team_key(settings, team, None)
    except NoTeamKey:
        return None


def eval_targets(settings: Settings, team: str, key: str | None = None,
                 keys: Mapping[str, str] | None = None) -> list[EvalTarget]:
    """What to evaluate: in a stack that trains the base, the base as `team` (its key: `key`, else its key file);
    in an adapters stack, each team's adapter (`proxy.teams.<team>.lora`) with that team's key (`keys`, else
    `known_key`). The base does not move there: a team's first pass (its v0, the adapter as it started, equal to
    the base) is the base's figure. A team without a key is left out (logged); none at all is an error."""
    trainers = adapter_trainers(settings)
    if not trainers:
        return [EvalTarget(team, None, team_key(settings, team, key))]
    keys = keys or {}
    targets, keyless = [], []
    for trainer in trainers:
        found = keys.get(trainer.team) or known_key(settings, trainer.team)
        if found is None:
            keyless.append(trainer.team)
        else:
            targets.append(EvalTarget(trainer.team, trainer.adapter, found))
    if keyless:
        log.warning("eval: no key for team(s) %s (team_keys, or <data_dir>/<team>.key): their adapters are not "
                    "evaluated", ", ".join(keyless))
    if not targets:
        raise ValueError(f"eval: the stack trains the adapters of {', '.join(t.team for t in trainers)} but no key "
                         "of theirs is known: give them in `team_keys` (or <data_dir>/<team>.key)")
    return targets


class EvalService:
    def __init__(self, settings: Settings, options: EvalOptions | None = None, key: str | None = None,
                 codec: Codec | None = None, keys: Mapping[str, str] | None = None):
        """`key`: the base's eval key (default: the team's key file); `keys`: team -> key, for the teams' adapters
        in an adapters stack (default: `team_keys`, else each team's key file)."""
        self.settings = settings
        self.options = options or EvalOptions.from_settings(settings)
        manager = ManagerOptions.from_settings(settings)
        self.kind, self.success_reward = manager.kind, manager.success_reward
        self.task_source = self.options.eval_file or manager.source
        self.tasks = eval_set(manager.source, self.options.count, manager.demo_seed, manager.demo_max_operand,
                              self.options.eval_file)
        self.agent = load_function(self.options.agent)
        self.team = self.options.team or settings.team
        self.targets = eval_targets(settings, self.team, key, keys)
        self.topic = Topics(settings).eval
        self.producer = MessageProducer(settings, codec or codec_for(settings))
        self.published: list[EvalResult] = []

    def evaluate_due(self, http: httpx.Client, proxies: Mapping[str, ProxyClient]) -> list[EvalResult]:
        """A pass for each target whose served version is due (`proxies`: team -> a client with its key), one after
        the other; returns the results published."""
        engines = proxy_engines(http, self.options.proxy_url)
        if engines is None:
            return []
        results = []
        for target in self.targets:
            version = served_by(engines, target.adapter)
            if version is not None and is_due(version, target.last_evaluated, self.options.eval_every):
                result = self.evaluate(target, version, proxies[target.team])
                if result is not None:
                    results.append(result)
        return results

    def evaluate(self, target: EvalTarget, version: int, proxy: ProxyClient) -> EvalResult | None:
        """One pass of `target`'s policy begun on `version`; its result is published (None: dropped, an update
        cut through it)."""
        started_ms, started = now_ms(), time.monotonic()
        tasks = [eval_task(t, version, target.team, self.settings.run, self.kind) for t in self.tasks]
        outcomes = run_pass(self.agent, tasks, version, proxy, self.success_reward, self.options.concurrency,
                            self.options.request_timeout_s)
        pinned = pin(outcomes)
        if pinned is None or (target.last_evaluated is not None and pinned[0] <= target.last_evaluated):
            log.info("%s v%d: no version generated most of the pass's sessions (updates cut through it); "
                     "trying again", target, version)
            return None
        version, kept = pinned
        figures = summarize(kept)
        result = EvalResult(new_id(), version, self.task_source, figures.accuracy, figures.mean_reward,
                            figures.mean_length, figures.samples, target.team, self.settings.run, started_ms,
                            now_ms())
        self.producer.send_and_wait(self.topic, self.settings.run, result)
        target.last_evaluated = version
        self.published.append(result)
        log.info("eval %s v%d: accuracy %.3f, mean reward %.3f, mean length %.1f over %d tasks (%.1f s)", target,
                 version, result.accuracy, result.mean_reward, result.mean_length, result.samples,
                 time.monotonic() - started)
        return result

    def run(self, stop: threading.Event | None = None) -> None:
        stop = stop or threading.Event()
        proxies = {t.team: ProxyClient(self.options.proxy_url, t.key) for t in self.targets}
        with httpx.Client(timeout=10.0) as http:
            try:
                while not stop.is_set():
                    self.evaluate_due(http, proxies)
                    stop.wait(self.options.poll_s)
            finally:
                for proxy in proxies.values():
                    proxy.close()
                self.producer.flush()


def run_service(settings: Settings, stop: threading.Event | None = None) -> None:
    EvalService(settings).run(stop)

"""The eval service: watches which weight version the engines serve and, every `eval_every` versions, runs
a greedy pass over the task source's eval set through the proxy and publishes an `EvalResult`.

Pinned to a version: the proxy's `/healthz` lists each engine with the version it serves. A pass starts
only when every routable engine serves the same version and the proxy is not paused. A weight update may
still cut through it (passes take seconds, updates come every few seconds on two cores): each session's
end answer says which versions generated it, and the figures are those of the sessions wholly generated
by the version most of them had (`core.evaluation.pin`; `samples` says how many). A pass where no
version generated at least half the sessions is dropped (logged) and run again. Restarting the service
evaluates the served version again (an extra point on the curve, never a wrong one).
"""

from __future__ import annotations

import logging
import threading
import time

import httpx

from seamlessflow.agents.proxy import ProxyClient
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
from seamlessflow.user_code import load_function

log = logging.getLogger("seamlessflow.evaluation")


def proxy_version(http: httpx.Client, proxy_url: str) -> int | None:
    """The version every routable engine behind the proxy serves, or None (paused, mixed, unreachable)."""
    try:
        health = http.get(f"{proxy_url.rstrip('/')}/healthz").json()
    except (httpx.HTTPError, ValueError):
        return None
    if health.get("paused"):
        return None
    return served_version([e["version"] for e in health.get("engines", []) if e["healthy"] and e["announced"]])


class EvalService:
    def __init__(self, settings: Settings, options: EvalOptions | None = None, key: str | None = None,
                 codec: Codec | None = None):
        self.settings = settings
        self.options = options or EvalOptions.from_settings(settings)
        manager = ManagerOptions.from_settings(settings)
        self.kind, self.success_reward = manager.kind, manager.success_reward
        self.task_source = self.options.eval_file or manager.source
        self.tasks = eval_set(manager.source, self.options.count, manager.demo_seed, manager.demo_max_operand,
                              self.options.eval_file)
        self.agent = load_function(self.options.agent)
        self.team = self.options.team or settings.team
        self.key = key or (settings.data_dir / f"{self.team}.key").read_text().strip()
        self.topic = Topics(settings).eval
        self.producer = MessageProducer(settings, codec or codec_for(settings))
        self.last_evaluated: int | None = None
        self.published: list[EvalResult] = []

    def evaluate_if_due(self, http: httpx.Client, proxy: ProxyClient) -> EvalResult | None:
        version = proxy_version(http, self.options.proxy_url)
        if version is None or not is_due(version, self.last_evaluated, self.options.eval_every):
            return None
        started_ms, started = now_ms(), time.monotonic()
        tasks = [eval_task(t, version, self.team, self.settings.run, self.kind) for t in self.tasks]
        outcomes = run_pass(self.agent, tasks, version, proxy, self.success_reward, self.options.concurrency,
                            self.options.request_timeout_s)
        pinned = pin(outcomes)
        if pinned is None or (self.last_evaluated is not None and pinned[0] <= self.last_evaluated):
            log.info("v%d: no version generated most of the pass's sessions (updates cut through it); "
                     "trying again", version)
            return None
        version, kept = pinned
        figures = summarize(kept)
        result = EvalResult(new_id(), version, self.task_source, figures.accuracy, figures.mean_reward,
                            figures.mean_length, figures.samples, self.team, self.settings.run, started_ms, now_ms())
        self.producer.send_and_wait(self.topic, self.settings.run, result)
        self.last_evaluated = version
        self.published.append(result)
        log.info("eval v%d: accuracy %.3f, mean reward %.3f, mean length %.1f over %d tasks (%.1f s)", version,
                 result.accuracy, result.mean_reward, result.mean_length, result.samples, time.monotonic() - started)
        return result

    def run(self, stop: threading.Event | None = None) -> None:
        stop = stop or threading.Event()
        proxy = ProxyClient(self.options.proxy_url, self.key)
        with httpx.Client(timeout=10.0) as http:
            try:
                while not stop.is_set():
                    self.evaluate_if_due(http, proxy)
                    stop.wait(self.options.poll_s)
            finally:
                proxy.close()
                self.producer.flush()


def run_service(settings: Settings, stop: threading.Event | None = None) -> None:
    EvalService(settings).run(stop)

"""Prometheus figures of one proxy, in its own registry (several proxies may share a test process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)


class ProxyMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "seamlessflow_proxy_requests", "HTTP requests by route and status", ["route", "code"], registry=r
        )
        self.latency = Histogram(
            "seamlessflow_proxy_request_seconds",
            "Request latency by route",
            ["route"],
            buckets=LATENCY_BUCKETS,
            registry=r,
        )
        self.tokens = Counter(
            "seamlessflow_proxy_tokens", "Tokens seen, by kind (prompt|completion)", ["kind"], registry=r
        )
        self.queue_depth = Gauge("seamlessflow_proxy_queue_depth", "Calls waiting for a slot or for resume", registry=r)
        self.inflight = Gauge("seamlessflow_proxy_inflight", "Calls holding a generation slot", registry=r)
        self.paused = Gauge("seamlessflow_proxy_paused", "1 while dispatching is paused", registry=r)
        self.events = Counter(
            "seamlessflow_proxy_events", "Events by outcome (produced|failed)", ["outcome"], registry=r
        )
        self.continuations = Counter(
            "seamlessflow_proxy_continuations", "Token-in continuations after a cut", registry=r
        )
        self.engines_routable = Gauge("seamlessflow_proxy_engines_routable", "Engines taking sessions now", registry=r)
        self.rejected = Counter("seamlessflow_proxy_rejected", "Requests refused, by reason", ["reason"], registry=r)
        # `rollout.sampling` (`proxy/sampling.py`): an agent's own settings the trainer cannot reproduce, replaced
        self.sampling_overridden = Counter(
            "seamlessflow_proxy_sampling_overridden", "Calls whose sampling setting was overridden, by team, setting",
            ["team", "setting"], registry=r,
        )
        self.invalid_logprobs = Counter(
            "seamlessflow_proxy_invalid_logprobs", "Generated tokens the engine gave no finite logprob for (never "
            "trained)", ["team"], registry=r,
        )
        # per team (`quotas.py`): every team's calls are counted, whether or not it has a quota
        self.team_admitted = Counter(
            "seamlessflow_proxy_team_admitted", "Calls let through by their team's quota", ["team"], registry=r
        )
        self.team_refused = Counter(
            "seamlessflow_proxy_team_refused", "Calls refused by their team's quota, by quota (sessions|tokens)",
            ["team", "quota"], registry=r,
        )
        self.team_tokens = Counter(
            "seamlessflow_proxy_team_tokens", "Tokens generated for the team's calls", ["team"], registry=r
        )
        self.team_sessions = Gauge(
            "seamlessflow_proxy_team_sessions", "The team's sessions with a call in flight", ["team"], registry=r
        )

    def exposition(self) -> bytes:
        return generate_latest(self.registry)

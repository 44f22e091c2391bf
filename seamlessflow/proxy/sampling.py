"""`rollout.sampling` at the proxy: each parsed call gets the sampling it is served with, or a 400.

The rule itself is the core's (`seamlessflow.core.sampling`, which says why); here it meets the proxy's world:
a refusal becomes a 400 naming the setting (nothing is generated or recorded), and a setting the rule replaced
is counted per team (`seamlessflow_proxy_sampling_overridden_total`) and logged once per team and setting, so an
operator can see which agents sample differently from what they asked for.
"""

from __future__ import annotations

import logging

from seamlessflow.core.sampling import SamplingRefused, SamplingRule
from seamlessflow.proxy.errors import ProxyError
from seamlessflow.proxy.metrics import ProxyMetrics
from seamlessflow.proxy.requests import CallRequest

log = logging.getLogger(__name__)


class SamplingGate:
    def __init__(self, rule: SamplingRule, metrics: ProxyMetrics):
        self.rule, self.metrics = rule, metrics
        self._told: set[tuple[str, str]] = set()

    def admit(self, call: CallRequest, team: str) -> None:
        """Sets ``call.sampled``; ProxyError 400 when the rule refuses one of the call's settings."""
        try:
            call.sampled = self.rule.apply(call.body)
        except SamplingRefused as refused:
            raise ProxyError(400, str(refused), refused.setting) from None
        for setting in call.sampled.overridden:
            self.metrics.sampling_overridden.labels(team, setting).inc()
            if (team, setting) not in self._told:
                self._told.add((team, setting))
                log.warning("team %s: calls set %r, which rollout.sampling overrides; they are served as the rule "
                            "says (docs/agents/index.md, 'Sampling')", team, setting)

"""The audit's rules for a stack that trains teams' adapters (`trainer.target: adapters`): every call served by
its team's adapter, every trajectory trained into its own team's adapter only, every trainer publishing
versions of its one adapter and nothing of the base.

Pure, as the audit: what the collector read (`collect.adapter_logs`) in, violations out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

from seamlessflow.messages import TokenIO, Trajectory, WeightVersion

if TYPE_CHECKING:
    from seamlessflow.kafka.io import Record


class Findings(Protocol):
    """What these rules write to: the audit's report (`audit.AuditReport`), which calls them."""

    counts: Counter

    def fail(self, kind: str, detail: str) -> None: ...


@dataclass(frozen=True)
class TeamAdapters:
    """`names`: each team's adapter (`proxy.teams.<team>.lora.name`; a team without one is absent: the base
    serves it); `steps`: each adapter team's trainer's durable step log; `trainers`: its trainer's resource id."""

    names: Mapping[str, str]
    steps: Mapping[str, Sequence[dict]]
    trainers: Mapping[str, str]


def check_adapters(adapters: TeamAdapters, calls: Iterable[TokenIO], stored: Mapping[str, Trajectory],
                   weights: Iterable[Record], report: Findings) -> None:
    _check_served(adapters, calls, report)
    _check_trained(adapters, stored, report)
    _check_published(adapters, weights, report)


def _check_served(adapters: TeamAdapters, calls: Iterable[TokenIO], report: Findings) -> None:
    for call in calls:
        wanted = adapters.names.get(call.team)
        if call.adapter != wanted:
            report.fail("served by the wrong adapter", f"{call.event_id} of team {call.team} names adapter "
                                                       f"{call.adapter!r}, its team's is {wanted!r}")
        elif wanted is not None:
            report.counts[f"calls served by adapter {wanted}"] += 1


def _check_trained(adapters: TeamAdapters, stored: Mapping[str, Trajectory], report: Findings) -> None:
    for team, steps in sorted(adapters.steps.items()):
        for tid in (tid for step in steps for tid in step.get("trajectory_ids", [])):
            trajectory = stored.get(tid)
            if trajectory is not None and trajectory.team != team:
                report.fail("trained into the wrong adapter", f"{tid} of team {trajectory.team} was trained into "
                                                              f"team {team}'s adapter")
            report.counts[f"trajectories trained into adapter {adapters.names[team]}"] += 1


def _check_published(adapters: TeamAdapters, weights: Iterable[Record], report: Findings) -> None:
    expected = {trainer: adapters.names[team] for team, trainer in adapters.trainers.items()}
    for record in weights:
        version = record.message
        if not isinstance(version, WeightVersion):
            continue
        if version.adapter is None:
            report.fail("base published in an adapters stack", f"{version.trainer_id} published base weights "
                                                                f"v{version.version}: adapters ride a frozen base")
        elif (trains := expected.get(version.trainer_id)) != version.adapter:
            report.fail("version of another adapter", f"{version.trainer_id} published v{version.version} of "
                                                      f"{version.adapter}; it trains {trains}")

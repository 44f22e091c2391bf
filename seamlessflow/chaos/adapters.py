"""The audit's rules for teams' adapters: every call served by its team's adapter (any stack: one that trains the
base may serve teams' adapters too); in a stack that trains teams' adapters (`trainer.target: adapters`) every
trajectory trained into its own team's adapter only, and only when that adapter sampled it, every trainer
publishing versions of its one adapter and nothing of the base; in a stack that trains the base, no trajectory an
adapter sampled trained into the base.

What the audit cannot see: the `model` a call asked for (a record names the adapter the proxy chose, not what
the client named); the proxy refuses another team's adapter before recording (`proxy/team_models.py`), so a
call recorded under its team's adapter is what was served.

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


def check_adapters(adapters: TeamAdapters, stored: Mapping[str, Trajectory], weights: Iterable[Record],
                   report: Findings) -> None:
    _check_trained(adapters, stored, report)
    _check_published(adapters, weights, report)


def check_served(names: Mapping[str, str], calls: Iterable[TokenIO], report: Findings) -> None:
    """`names`: each team's adapter (a team absent: the base). A call recorded under another adapter than its
    team's (or under one where its team has none) was served what its team's config does not give it."""
    for call in calls:
        wanted = names.get(call.team)
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
            elif trajectory is not None and trajectory.adapter != adapters.names[team]:
                report.fail("trained another policy's samples", f"{tid}, sampled by {_policy(trajectory.adapter)}, "
                                                                f"was trained into adapter {adapters.names[team]}")
            report.counts[f"trajectories trained into adapter {adapters.names[team]}"] += 1


def check_base_trained(steps: Sequence[dict], stored: Mapping[str, Trajectory], report: Findings) -> None:
    """The base's trainer: no step of it holds a trajectory an adapter sampled."""
    for tid in (tid for step in steps for tid in step.get("trajectory_ids", [])):
        trajectory = stored.get(tid)
        if trajectory is not None and trajectory.adapter is not None:
            report.fail("trained another policy's samples", f"{tid}, sampled by adapter {trajectory.adapter!r}, "
                                                            "was trained into the base")


def _policy(adapter: str | None) -> str:
    return "the base" if adapter is None else f"adapter {adapter!r}"


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

"""Evaluation pinned to a policy version: when a pass is due, how its sessions are tagged, what it measures.

Why pure: the eval service, the trainer (which must never train on an eval session) and the scheduler
(which must not count eval trajectories as training data) all need the same tag rule, and the figures are
plain arithmetic worth testing with plain values.

Tag: an eval session's group id starts with `EVAL_GROUP_PREFIX` (`eval/<run>/v<version>/<task id>`). Group
ids travel from the episode end into every trajectory, so a consumer needs no other record to recognise one.

Due: weight versions are published faster than engines load them (an engine may go from v3 straight to v7),
so a pass is run on the version the engines actually serve, once that is at least `eval_every` above the
last one evaluated; the first pass runs on whatever is served first (the warm start, v0, in a fresh run).

Pinned: on two CPU cores a pass (seconds) is longer than the gap between weight updates, so a pass often
straddles one. Each session reports the versions that generated its tokens (the proxy's answer to its
end); the pass counts for the version that wholly generated the most sessions, and its figures are taken
over exactly those sessions (`pin`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

EVAL_GROUP_PREFIX = "eval/"


def eval_group_id(run: str, version: int, task_id: str) -> str:
    return f"{EVAL_GROUP_PREFIX}{run}/v{version}/{task_id}"


def is_eval_group(group_id: str) -> bool:
    """True for a session run by an evaluation pass: never trained on, never counted as rollout data."""
    return group_id.startswith(EVAL_GROUP_PREFIX)


def is_due(served_version: int | None, last_evaluated: int | None, eval_every: int) -> bool:
    """Whether to evaluate the version the engines serve now (None: no version agreed on yet)."""
    if served_version is None:
        return False
    return last_evaluated is None or served_version >= last_evaluated + eval_every


def served_version(versions: Sequence[int]) -> int | None:
    """The one version every healthy engine serves, or None while they disagree (an update under way) or
    there is none: a pass pinned to a version must not mix two."""
    distinct = set(versions)
    return distinct.pop() if len(distinct) == 1 else None


@dataclass(frozen=True)
class EvalOutcome:
    """One eval task's result: its graded reward, whether it was exactly right, tokens generated, and the
    policy versions that generated them."""

    reward: float
    exact: bool
    generated_tokens: int
    versions: frozenset[int] = frozenset()


def pin(outcomes: Sequence[EvalOutcome], min_share: float = 0.5) -> tuple[int, list[EvalOutcome]] | None:
    """(version, its outcomes): the version that alone generated the most sessions of the pass, and those
    sessions; None when fewer than `min_share` of the sessions share one version (ties: the newer)."""
    by_version: dict[int, list[EvalOutcome]] = {}
    for outcome in outcomes:
        if len(outcome.versions) == 1:
            by_version.setdefault(next(iter(outcome.versions)), []).append(outcome)
    if not by_version:
        return None
    version, pinned = max(by_version.items(), key=lambda item: (len(item[1]), item[0]))
    if len(pinned) < min_share * len(outcomes):
        return None
    return version, pinned


@dataclass(frozen=True)
class EvalFigures:
    accuracy: float
    mean_reward: float
    mean_length: float
    samples: int


def summarize(outcomes: Sequence[EvalOutcome]) -> EvalFigures:
    """Accuracy (share exact), mean reward and mean generated length; zeros for an empty pass."""
    n = len(outcomes)
    if n == 0:
        return EvalFigures(0.0, 0.0, 0.0, 0)
    return EvalFigures(
        accuracy=sum(o.exact for o in outcomes) / n,
        mean_reward=sum(o.reward for o in outcomes) / n,
        mean_length=sum(o.generated_tokens for o in outcomes) / n,
        samples=n,
    )

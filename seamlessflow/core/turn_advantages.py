"""Per-token advantages from the rewards an agent gave single turns of its sessions.

Why: a multi-turn agent (40 tool calls, one answer) that can only reward the whole session gives every turn
the same credit. With per-turn rewards (`EpisodeEnd.call_rewards`, carried by the assembler onto
`Trajectory.turn_ends` / `turn_rewards`) the trainer can credit each turn's tokens by what followed them.
A turn's value is the reward the agent gave it (0 where none), plus the session reward on the last turn.

Rules (`trainer.advantages`):

- ``session``: today's GRPO, the group-relative session reward on every token (turn rewards ignored).
- ``return_to_go``: turn k's tokens get G_k = sum_{j>=k} discount^(j-k) value_j minus the mean of G_k over the
  group's trajectories that have a turn k, divided by their std of G_k when ``scale_by_std``.
- ``per_turn_group``: turn k's tokens get value_k normalised the same way against the values of turn k of the
  group's trajectories that have a turn k.

Why a baseline per turn index: G_k only counts what follows turn k, so a baseline of whole returns G_0 charges
late turns for the rewards that earlier turns already took (ten turns rewarded 0.1 each and a session reward of
1 against 0: the successful answer turn got 1.1 - 1.5 = -0.4). Centring G_k on the group's G_k at the same
index is the baseline GRPO uses for whole sessions, applied per turn: the other trajectories' returns do not
depend on this trajectory's actions, so the baseline adds no bias, and in that example every turn of the
success gets +0.5 (std unscaled). As in GRPO the mean includes the trajectory itself.

Trajectories of different lengths: turn k is compared only with the trajectories that reached a turn k, the
state it is in; a turn that no other trajectory of its group reached gets 0 (no baseline to compare against,
like a group of one). So with no turn rewards and ``discount`` 1, ``return_to_go`` is ``session`` exactly when
the group's trajectories have the same number of turns. With ``scale_by_std`` each index is scaled by its own
std, which also undoes the shrinking a ``discount`` below 1 gives early turns; Dr. GRPO's
``scale_by_std: false`` keeps it.

Std is the unbiased sample std as in `core.losses.group_relative_advantages`; a set of one has std 0.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum


class AdvantageRule(StrEnum):
    SESSION = "session"
    RETURN_TO_GO = "return_to_go"
    PER_TURN_GROUP = "per_turn_group"


@dataclass(frozen=True)
class TurnRewards:
    """One trajectory's turns: turn k spans tokens [ends[k-1], ends[k]); no ends: one turn, the whole."""

    length: int
    session_reward: float
    ends: tuple[int, ...] = ()
    rewards: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if len(self.ends) != len(self.rewards):
            raise ValueError(f"{len(self.ends)} turn ends but {len(self.rewards)} turn rewards")
        if list(self.ends) != sorted(self.ends) or (self.ends and self.ends[-1] > self.length):
            raise ValueError(f"turn ends {self.ends} do not rise within {self.length} tokens")

    def spans(self) -> list[tuple[int, int]]:
        """[start, end) of each turn; the last runs to the sequence's end."""
        ends = list(self.ends[:-1]) + [self.length] if self.ends else [self.length]
        return list(zip([0, *ends[:-1]], ends, strict=True))

    def values(self) -> list[float]:
        """Each turn's reward, the session reward added to the last turn."""
        values = list(self.rewards) if self.rewards else [0.0]
        values[-1] += self.session_reward
        return values


def returns_to_go(values: Sequence[float], discount: float) -> list[float]:
    """G_k = value_k + discount * G_{k+1}."""
    out: list[float] = []
    running = 0.0
    for value in reversed(values):
        running = value + discount * running
        out.append(running)
    return out[::-1]


def _centre(values: list[float], scale_by_std: bool, eps: float) -> tuple[float, float]:
    """(mean, divisor) of a set: the divisor is std + eps when scaling by std, else 1."""
    mean = sum(values) / len(values)
    if not scale_by_std:
        return mean, 1.0
    std = math.sqrt(sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1))
    return mean, (std + eps) or 1.0  # std 0 and no eps: every value equals the mean, so 0 whatever the divisor


def _spread(turns: TurnRewards, per_turn: Sequence[float]) -> list[float]:
    out = [0.0] * turns.length
    for (start, end), value in zip(turns.spans(), per_turn, strict=True):
        out[start:end] = [value] * (end - start)
    return out


def _group_members(group_index: Sequence[int]) -> dict[int, list[int]]:
    members: dict[int, list[int]] = defaultdict(list)
    for i, group in enumerate(group_index):
        members[group].append(i)
    return members


def _per_index(rows: Sequence[Sequence[float]], group_index: Sequence[int], scale_by_std: bool,
               eps: float) -> list[list[float]]:
    """Each row's entry k centred on (and with ``scale_by_std`` scaled by) entry k of its group's rows that
    have one; rows of one entry each are GRPO on those entries."""
    out = [list(row) for row in rows]
    for members in _group_members(group_index).values():
        for k in range(max(len(rows[i]) for i in members)):
            having = [i for i in members if k < len(rows[i])]
            mean, divisor = _centre([rows[i][k] for i in having], scale_by_std, eps)
            for i in having:
                out[i][k] = (rows[i][k] - mean) / divisor
    return out


def token_advantages(trajectories: Sequence[TurnRewards], group_index: Sequence[int], rule: AdvantageRule,
                     discount: float = 1.0, scale_by_std: bool = True, eps: float = 1e-6) -> list[list[float]]:
    """One advantage per token of each trajectory, by ``rule`` (see the module's docstring).

    Shapes: ``trajectories`` [B], ``group_index`` [B] (trajectory i's group); the result [B][length_i], one
    value per token of trajectory i, constant over each of its turns (over the whole sequence for ``session``).
    """
    if len(trajectories) != len(group_index):
        raise ValueError(f"{len(trajectories)} trajectories but {len(group_index)} group indices")
    rule = AdvantageRule(rule)
    if rule is AdvantageRule.SESSION:
        whole = _per_index([[t.session_reward] for t in trajectories], group_index, scale_by_std, eps)
        return [[row[0]] * t.length for t, row in zip(trajectories, whole, strict=True)]
    rows = [t.values() for t in trajectories]
    if rule is AdvantageRule.RETURN_TO_GO:
        rows = [returns_to_go(values, discount) for values in rows]
    per_turn = _per_index(rows, group_index, scale_by_std, eps)
    return [_spread(t, values) for t, values in zip(trajectories, per_turn, strict=True)]


def has_signal(trajectories: Sequence[TurnRewards], rule: AdvantageRule, discount: float = 1.0,
               tolerance: float = 1e-9) -> bool:
    """Whether a group would get a non-zero advantage anywhere under ``rule`` (at least two trajectories)."""
    if len(trajectories) < 2:
        return False
    advantages = token_advantages(trajectories, [0] * len(trajectories), rule, discount, scale_by_std=False)
    return any(abs(a) > tolerance for row in advantages for a in row)

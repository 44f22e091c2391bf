"""From a stream of finished trajectories to training batches of GRPO groups.

Why pure: which trajectories are trained, skipped or dropped decides what the model learns, so the rules
(de-duplication, group completion, staleness bound, SRPO's zero-variance skip, batch threshold) are plain
arithmetic on values, tested without a broker. The caller supplies the current policy version and the time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Literal

from seamlessflow.core.episodes import TrajectoryStatus
from seamlessflow.core.recent_ids import RecentIds
from seamlessflow.core.turn_advantages import AdvantageRule, TurnRewards, has_signal


@dataclass(frozen=True)
class TrajectorySample:
    """One trainable token sequence, as the assembler emitted it.

    ``versions[t]`` is the policy version that generated token t, -1 where the token was not generated
    (prompt, tool output). ``logprobs[t]`` is the inference engine's logprob of token t (0 where not
    generated).
    """

    trajectory_id: str
    group_id: str
    task_id: str
    tokens: tuple[int, ...]
    loss_mask: tuple[int, ...]
    logprobs: tuple[float, ...]
    versions: tuple[int, ...]
    reward: float
    status: TrajectoryStatus = TrajectoryStatus.DONE
    turn_ends: tuple[int, ...] = ()  # the assembler's turns and the agent's reward for each (`Trajectory`)
    turn_rewards: tuple[float, ...] = ()
    # the temperature each token was sampled at (`Trajectory.temperatures`); empty: 1.0 everywhere. ``logprobs``
    # are of that distribution, so the trainer computes its own at the same temperature
    temperatures: tuple[float, ...] = ()
    # the teacher's logprob of each generated token (`Trajectory.teacher_logprobs`, `core.distillation`); empty:
    # not taught
    teacher_logprobs: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        lengths = {len(self.tokens), len(self.loss_mask), len(self.logprobs), len(self.versions)}
        for optional in (self.temperatures, self.teacher_logprobs):
            if optional:
                lengths.add(len(optional))
        if len(lengths) != 1:
            raise ValueError(f"trajectory {self.trajectory_id}: per-token fields differ in length {lengths}")

    @property
    def oldest_version(self) -> int | None:
        """Oldest policy version among generated tokens; None if nothing was generated."""
        generated = [v for v in self.versions if v >= 0]
        return min(generated) if generated else None

    @property
    def trained_tokens(self) -> int:
        return sum(1 for m in self.loss_mask if m)

    @property
    def turns(self) -> TurnRewards:
        return TurnRewards(len(self.tokens), self.reward, self.turn_ends, self.turn_rewards)


@dataclass(frozen=True)
class StalenessPolicy:
    """How far behind the current version a trajectory's oldest token may be.

    Beyond ``max_staleness`` a trajectory is dropped, or in ``downweight`` mode kept with weight
    ``decay ** (versions beyond the bound)``. ``max_staleness=None`` accepts everything.
    """

    max_staleness: int | None
    mode: Literal["drop", "downweight"]
    decay: float

    def weight(self, sample: TrajectorySample, current_version: int) -> float:
        """1.0 for fresh enough, 0.0 for dropped, in between for down-weighted."""
        oldest = sample.oldest_version
        if self.max_staleness is None or oldest is None:
            return 1.0
        excess = current_version - oldest - self.max_staleness
        if excess <= 0:
            return 1.0
        return 0.0 if self.mode == "drop" else self.decay**excess


TRAINABLE_STATUSES = (TrajectoryStatus.DONE, TrajectoryStatus.TRUNCATED)  # a truncated one is still what inference saw


def rewards_all_equal(samples: list[TrajectorySample], tolerance: float = 1e-9) -> bool:
    """A group whose rewards are all equal has zero advantage everywhere: no learning signal."""
    return not rewards_vary([s.reward for s in samples], tolerance)


def rewards_vary(rewards: list[float], tolerance: float = 1e-9) -> bool:
    """Whether a group with these rewards would be trained: at least two, and not all equal."""
    return len(rewards) >= 2 and max(rewards) - min(rewards) > tolerance


def solved_by_all(rewards: list[float], success_reward: float) -> bool:
    """SRPO's "too easy": at least two sessions and every one reached the success reward. Checked on groups
    without signal, so the task teaches nothing now and may be skipped later."""
    return len(rewards) >= 2 and min(rewards) >= success_reward


@dataclass(frozen=True)
class BatchConfig:
    """``group_size``: samples per task that close a group. A batch is formed once ``threshold`` groups
    (``threshold_kind="groups"``) or trained tokens (``"tokens"``) are ready. A group still incomplete
    ``group_timeout_s`` after its first sample is closed with what arrived (None: wait forever).
    ``success_reward``: a group whose rewards all reach it marks its task "too easy" (SRPO).
    ``dedup_window``: how many of the newest trajectory ids (and group ids) are remembered to skip a
    duplicate or a late sample (`core.recent_ids` says why a window is enough), and of the newest too-easy
    task ids (a record for the checkpoint; an environment may name a new task for every group).

    The frozen view of the trainer's options (`TrainerOptions.batch_config`), which hold the one set of defaults."""

    group_size: int
    threshold: int
    threshold_kind: Literal["groups", "tokens"]
    group_timeout_s: float | None
    staleness: StalenessPolicy
    success_reward: float
    trainable_statuses: frozenset[TrajectoryStatus]
    dedup_window: int
    advantage: AdvantageRule  # how rewards become advantages (`core.turn_advantages`)
    discount: float  # return_to_go's discount per turn
    # with a distilling objective a taught sample carries signal of its own: a group of one, or of equal rewards,
    # is trained (`core.distillation`)
    distills: bool = False


@dataclass
class KeptGroup:
    """A group that carries signal, with one weight per sample (staleness down-weighting)."""

    group_id: str
    task_id: str
    samples: list[TrajectorySample]
    weights: list[float]

    @property
    def trained_tokens(self) -> int:
        return sum(s.trained_tokens for s in self.samples)


@dataclass
class Counters:
    """Cumulative counts since the builder started; the trainer logs their per-step difference."""

    duplicates: int = 0
    late: int = 0
    bad_status: int = 0
    stale_dropped: int = 0
    stale_at_train: int = 0  # dropped when taken for training: they went stale while their group waited
    groups_stale_at_train: int = 0  # kept groups then discarded whole: too few samples or no signal left
    groups_kept: int = 0
    groups_skipped_equal: int = 0
    groups_too_small: int = 0

    def minus(self, earlier: Counters) -> Counters:
        return Counters(**{k: v - getattr(earlier, k) for k, v in vars(self).items()})


@dataclass
class PollResult:
    """``batch``: groups to train now (empty list: not enough yet). ``discarded``: samples finished
    without training (stale, no signal, bad status), which the caller may treat as consumed."""

    batch: list[KeptGroup]
    discarded: list[TrajectorySample]


@dataclass
class _OpenGroup:
    group_id: str
    task_id: str
    first_seen: float
    arrived: int = 0
    samples: list[TrajectorySample] = field(default_factory=list)


class BatchBuilder:
    """Collects samples into GRPO groups and hands out batches of groups with signal."""

    def __init__(self, config: BatchConfig, seen_ids: Iterable[str] = (), too_easy_tasks: Iterable[str] = ()) -> None:
        self.config = config
        self.counters = Counters()
        self.too_easy_tasks = RecentIds(config.dedup_window, too_easy_tasks)  # oldest first
        self._seen_ids = RecentIds(config.dedup_window, seen_ids)
        self._open: dict[str, _OpenGroup] = {}
        self._closed_ids = RecentIds(config.dedup_window)
        self._closed: list[_OpenGroup] = []
        self._ready: list[KeptGroup] = []
        self._ready_version: int | None = None  # the version the ready groups were last weighed at
        self._discarded: list[TrajectorySample] = []

    def add(self, sample: TrajectorySample, now: float) -> bool:
        """Take one sample; False when it will not be trained (duplicate id, late for a closed group, or a
        status such as an error, which still counts towards closing its group)."""
        if sample.trajectory_id in self._seen_ids:
            self.counters.duplicates += 1
            return False
        self._seen_ids.add(sample.trajectory_id)
        if sample.group_id in self._closed_ids:
            self.counters.late += 1
            self._discarded.append(sample)
            return False
        group = self._open.setdefault(sample.group_id, _OpenGroup(sample.group_id, sample.task_id, now))
        group.arrived += 1
        trainable = sample.status in self.config.trainable_statuses
        if trainable:
            group.samples.append(sample)
        else:
            self.counters.bad_status += 1
            self._discarded.append(sample)
        if group.arrived >= self.config.group_size:
            self._close(sample.group_id)
        return trainable

    def poll(self, current_version: int, now: float) -> PollResult:
        """Close timed-out groups, judge closed ones against ``current_version`` (and ready ones again when it
        moved), and hand out the oldest ready groups that just reach the threshold (the rest wait for the next
        poll)."""
        self._close_timed_out(now)
        self._rejudge_ready(current_version)
        for group in self._closed:
            self._judge(group, current_version)
        self._closed.clear()
        discarded, self._discarded = self._discarded, []
        if self._amount(self._ready) < self.config.threshold:
            return PollResult([], discarded)
        size = 1
        while self._amount(self._ready[:size]) < self.config.threshold:
            size += 1
        batch, self._ready = self._ready[:size], self._ready[size:]
        return PollResult(batch, discarded)

    def steps_ready(self) -> float:
        """How many batches the groups judged and waiting would make: the trainer stops reading while this
        is enough for the next steps, so the backlog waits on the topic instead of in its memory."""
        return self._amount(self._ready) / max(self.config.threshold, 1)

    @property
    def pending_samples(self) -> list[TrajectorySample]:
        """Samples held (open, closed or ready groups) and not yet handed out."""
        held = [s for g in self._open.values() for s in g.samples]
        held += [s for g in self._closed for s in g.samples]
        return held + [s for g in self._ready for s in g.samples]

    def forget_pending(self) -> list[TrajectorySample]:
        """Drops every held sample so it can be added again (its records will be read again, e.g. after
        the consumer lost its partitions); ids already trained or discarded stay de-duplicated."""
        dropped = self.pending_samples
        groups = list(self._open.values()) + self._closed
        for group_id in {g.group_id for g in groups} | {g.group_id for g in self._ready}:
            self._closed_ids.discard(group_id)
        for sample in dropped:
            self._seen_ids.discard(sample.trajectory_id)
        self._open, self._closed, self._ready = {}, [], []
        return dropped

    def _close(self, group_id: str) -> None:
        self._closed.append(self._open.pop(group_id))
        self._closed_ids.add(group_id)

    def _close_timed_out(self, now: float) -> None:
        timeout = self.config.group_timeout_s
        if timeout is None:
            return
        for group_id in [g for g, o in self._open.items() if now - o.first_seen >= timeout]:
            self._close(group_id)

    def _weigh(self, samples: list[TrajectorySample],
               current_version: int) -> tuple[list[tuple[TrajectorySample, float]], list[TrajectorySample]]:
        """(kept samples with their staleness weights, dropped samples) at ``current_version``."""
        weighted = [(s, self.config.staleness.weight(s, current_version)) for s in samples]
        return [(s, w) for s, w in weighted if w > 0], [s for s, w in weighted if w == 0]

    def _rejudge_ready(self, current_version: int) -> None:
        """The staleness rule must hold when a group is trained, not only when it closed: a kept group may wait
        in the ready queue while the trainer's version moves on. So when the version moved, every ready group is
        weighed again: samples now beyond the bound are dropped (`stale_at_train`) or weigh less, and a group
        left with fewer than two samples or no signal is discarded whole (`groups_stale_at_train`)."""
        if current_version == self._ready_version:
            return
        self._ready_version, ready, self._ready = current_version, self._ready, []
        for group in ready:
            kept, dropped = self._weigh(group.samples, current_version)
            samples = [s for s, _ in kept]
            self.counters.stale_at_train += len(dropped)
            self._discarded.extend(dropped)
            if dropped and (len(samples) < self._smallest or not self._has_signal(samples)):
                self.counters.groups_stale_at_train += 1
                self._discarded.extend(samples)
            else:
                self._ready.append(KeptGroup(group.group_id, group.task_id, samples, [w for _, w in kept]))

    def _judge(self, group: _OpenGroup, current_version: int) -> None:
        kept, dropped = self._weigh(group.samples, current_version)
        self.counters.stale_dropped += len(dropped)
        self._discarded.extend(dropped)
        samples = [s for s, _ in kept]
        if len(samples) < self._smallest:
            self.counters.groups_too_small += 1
            self._discarded.extend(samples)
        elif not self._has_signal(samples):
            self.counters.groups_skipped_equal += 1
            if solved_by_all([s.reward for s in samples], self.config.success_reward):
                self.too_easy_tasks.add(group.task_id)
            self._discarded.extend(samples)
        else:
            self.counters.groups_kept += 1
            self._ready.append(KeptGroup(group.group_id, group.task_id, samples, [w for _, w in kept]))

    @property
    def _smallest(self) -> int:
        """Samples a group needs: two for a group-relative advantage; one when a teacher gives the signal."""
        return 1 if self.config.distills else 2

    def _has_signal(self, samples: list[TrajectorySample]) -> bool:
        """Equal session rewards teach nothing under the session rule; with per-turn rules the turns may; a
        teacher's logprobs always may."""
        if self.config.distills and any(s.teacher_logprobs for s in samples):
            return True
        if self.config.advantage is AdvantageRule.SESSION:
            return not rewards_all_equal(samples)
        return has_signal([s.turns for s in samples], self.config.advantage, self.config.discount)

    def _amount(self, groups: list[KeptGroup]) -> int:
        if self.config.threshold_kind == "groups":
            return len(groups)
        return sum(g.trained_tokens for g in groups)

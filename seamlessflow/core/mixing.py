"""Which task source the next task group comes from, so that every source gets its share of every batch.

Why a rule on counts rather than a random draw or a stateful round robin: the next source is the one
furthest behind its share (`weight / total weight` of the groups published so far, counting the next one),
ties to the first listed. Any prefix of the sequence is within one group of each source's share, and the
choice depends only on the counts, which the rollout manager rebuilds from the tasks topic after a restart,
so a restarted manager continues the same sequence.
"""

from __future__ import annotations

from collections.abc import Sequence


def next_source(weights: Sequence[float], published: Sequence[int]) -> int:
    """Index of the source to publish from next; `published[i]`: groups source i got so far."""
    if not weights or len(weights) != len(published) or min(weights) <= 0:
        raise ValueError(f"need one positive weight per source, got {list(weights)} for {list(published)}")
    total, upcoming = sum(weights), sum(published) + 1
    owed = [w / total * upcoming - n for w, n in zip(weights, published, strict=True)]
    return max(range(len(owed)), key=lambda i: (owed[i], -i))


def source_of_task(task_id: str) -> str:
    """The task source a task id names (`<source>:<task>.r<round>`); `default` for unprefixed ids."""
    name, sep, _ = task_id.partition(":")
    return name if sep else "default"


def source_figures(groups: Sequence) -> dict[str, dict[str, float]]:
    """Per task source of one training batch (groups with `task_id`, `samples`, `trained_tokens`): groups,
    samples, trained tokens and mean reward, for the trainer's step log."""
    out: dict[str, dict[str, float]] = {}
    for group in groups:
        entry = out.setdefault(
            source_of_task(group.task_id), {"groups": 0, "samples": 0, "tokens": 0, "reward_sum": 0.0}
        )
        entry["groups"] += 1
        entry["samples"] += len(group.samples)
        entry["tokens"] += group.trained_tokens
        entry["reward_sum"] += sum(s.reward for s in group.samples)
    for entry in out.values():
        entry["reward_mean"] = entry.pop("reward_sum") / entry["samples"] if entry["samples"] else 0.0
    return out

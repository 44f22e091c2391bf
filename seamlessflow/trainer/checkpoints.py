"""The trainer group's checkpoints: which one a restart loads, and beyond one node's disk, when `checkpoint_uri`
names a store.

Which one: every trainer process saves under tags of its own (`tag`: the step and the process's incarnation),
and a checkpoint is named in `latest` (DeepSpeed's pointer, what a restart loads; the store's too) only after
the transaction that commits its offsets succeeded (`name_latest`, called by the loop). A trainer fenced by a
newer one (seamlessflow.kafka.fencing) fails that commit: its checkpoint lies in a tag nobody names, never
over the newer one's, and `prune_tags` of the trainer that holds the role deletes it. Checked before the
rename, not enforced by the broker: a process frozen between its commit and the rename, and woken after a
replacement named one of its own, would name its own (committed, complete) checkpoint again, so a restart
would replay from it: trained twice, never lost.

Why here and in this order: DeepSpeed saves every rank's part into the local checkpoint directory of the
rank's node. Each node's first rank (LOCAL_RANK 0) then uploads what its node holds; only when every node has
(a barrier) does the leader upload the step log and mark the tag `latest` in the store, so the store never
names a tag with a part missing. At start, each node's first rank downloads the store's newest tag when its
node lacks it, and every rank waits for that before DeepSpeed loads. The I/O is `seamlessflow.storage`.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from seamlessflow.storage import LATEST, CheckpointStore
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.ranks import RankGroup

STEP_LOG = "steps.jsonl"  # which trajectories each step trained: travels with the checkpoints


def checkpoint_store(options: TrainerOptions) -> CheckpointStore | None:
    return CheckpointStore(options.checkpoint_uri, options.checkpoint_storage) if options.checkpoint_uri else None


def first_on_node() -> bool:
    """This rank is its node's first (torch's launcher sets LOCAL_RANK; a lone process is)."""
    return int(os.environ.get("LOCAL_RANK", "0")) == 0


def fetch_newest(store: CheckpointStore | None, directory: Path, ranks: RankGroup) -> str | None:
    """Every rank calls this before loading: the store's newest tag, downloaded where this node lacks it."""
    if store is None:
        return None
    tag = store.download_latest(directory) if first_on_node() else None
    ranks.barrier()
    return tag


def upload_part(store: CheckpointStore | None, directory: Path, tag: str, ranks: RankGroup) -> None:
    """Every rank calls this after saving its part of `tag`: the node's files to the store."""
    if store is None:
        return
    ranks.barrier()  # every rank of this node has written its files
    if first_on_node():
        store.upload_tag(directory, tag)
    ranks.barrier()  # every node's part is in the store


def mark_complete(store: CheckpointStore | None, tag: str, step_log: Path, keep: int) -> None:
    """The leader, after `upload_part`: the step log, then `latest`, then old tags pruned."""
    if store is None:
        return
    if step_log.exists():
        store.upload_file(step_log, STEP_LOG)
    store.mark_latest(tag)
    store.prune(keep)


def tag(step: int, incarnation: str) -> str:
    """`step00000012-<incarnation>`: sorts by step, and no two trainer processes ever write the same tag."""
    return f"step{step:08d}-{incarnation}"


def name_latest(directory: Path, tag: str) -> None:
    """`latest` names `tag` (atomically: a crash leaves the old name or the new one), after its offsets committed."""
    staged = directory / f"{LATEST}.{os.getpid()}"
    staged.write_text(tag)
    os.replace(staged, directory / LATEST)


def prune_tags(directory: Path, current: str, keep: int) -> None:
    """Keeps `current` and the `keep - 1` newest tags before it; deletes the older ones and every tag sorted
    after it (saved by no committed transaction: a fenced trainer's, or one saved just before a crash)."""
    tags = sorted(p.name for p in directory.glob("step*") if p.is_dir() and "." not in p.name)  # not downloads
    before = [t for t in tags if t < current]
    kept = {current, *before[len(before) - max(keep - 1, 0):]}
    for name in tags:
        if name not in kept:
            shutil.rmtree(directory / name, ignore_errors=True)

"""The trainer group's checkpoints beyond one node's disk, when `checkpoint_uri` names a store.

Why here and in this order: DeepSpeed saves every rank's part into the local checkpoint directory of the
rank's node. Each node's first rank (LOCAL_RANK 0) then uploads what its node holds; only when every node has
(a barrier) does the leader upload the step log and mark the tag `latest` in the store, so the store never
names a tag with a part missing. At start, each node's first rank downloads the store's newest tag when its
node lacks it, and every rank waits for that before DeepSpeed loads. The I/O is `seamlessflow.storage`.
"""

from __future__ import annotations

import os
from pathlib import Path

from seamlessflow.storage import CheckpointStore
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.ranks import RankGroup

STEP_LOG = "steps.jsonl"  # which trajectories each step trained: travels with the checkpoints


def checkpoint_store(config: TrainerOptions) -> CheckpointStore | None:
    return CheckpointStore(config.checkpoint_uri, config.checkpoint_storage) if config.checkpoint_uri else None


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

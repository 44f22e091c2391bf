"""Checkpoints at a storage URI, so a trainer that starts on a node without its local checkpoint resumes.

Why: DeepSpeed writes a checkpoint into a local directory (`<tag>/` with each rank's files, and `latest`
naming the newest tag). A trainer restarted on another node (the old one lost) finds none there. With a
storage URI (`s3://bucket/prefix` for object storage, or a path every trainer node sees), each checkpoint
is uploaded after DeepSpeed saved it, and `latest` is written there last, so the store's `latest` always
names a complete tag; a start whose local directory lacks that tag downloads it first. fsspec does the
I/O (s3fs for `s3://`), so any file system it knows works the same way.
"""

from __future__ import annotations

import posixpath
import shutil
from pathlib import Path
from typing import Any

import fsspec

LATEST = "latest"  # DeepSpeed's own pointer file name, kept in the store too


class CheckpointStore:
    """One storage URI holding checkpoint tags (`<uri>/<tag>/...`), `<uri>/latest` and loose files beside."""

    def __init__(self, uri: str, options: dict[str, Any] | None = None):
        self.uri = uri
        self.fs, self.root = fsspec.core.url_to_fs(uri, **(options or {}))
        self.root = self.root.rstrip("/")

    def _path(self, *parts: str) -> str:
        return "/".join([self.root, *parts])

    def _put(self, path: Path, remote: str) -> None:
        self.fs.makedirs(posixpath.dirname(remote), exist_ok=True)  # a plain path needs them; S3 has no folders
        self.fs.put_file(str(path), remote)

    def upload_tag(self, local: Path, tag: str) -> None:
        """Every file of `local/tag` on this node (a node's part of the checkpoint) to `<uri>/<tag>/`."""
        for path in sorted(p for p in (Path(local) / tag).rglob("*") if p.is_file()):
            self._put(path, self._path(tag, path.relative_to(Path(local) / tag).as_posix()))

    def mark_latest(self, tag: str) -> None:
        """Only once every node uploaded its part: from then on a restart takes this tag."""
        self.fs.makedirs(self.root, exist_ok=True)
        self.fs.pipe_file(self._path(LATEST), tag.encode())

    def latest(self) -> str | None:
        self.fs.invalidate_cache()
        try:
            return self.fs.cat_file(self._path(LATEST)).decode().strip() or None
        except FileNotFoundError:
            return None

    def download_latest(self, local: Path) -> str | None:
        """The store's newest tag into `local` (and `local/latest`) unless `local` already has it or a newer
        one; returns the tag downloaded, or None."""
        tag, local = self.latest(), Path(local)
        held = (local / LATEST).read_text().strip() if (local / LATEST).exists() else ""
        if tag is None or (held >= tag and (local / held).is_dir()):
            return None
        staging = local / f"{tag}.download"
        shutil.rmtree(staging, ignore_errors=True)
        prefix = self._path(tag) + "/"
        for remote in self.fs.find(self._path(tag)):
            target = staging / remote.removeprefix(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            self.fs.get_file(remote, str(target))
        shutil.rmtree(local / tag, ignore_errors=True)
        staging.rename(local / tag)
        (local / LATEST).write_text(tag)
        return tag

    def prune(self, keep: int) -> None:
        """Deletes all but the newest `keep` tags (tags sort by step), never the one `latest` names."""
        latest = self.latest()
        tags = sorted(Path(p).name for p in self.fs.ls(self.root, detail=False) if self.fs.isdir(p))
        for old in tags[:-keep] if keep > 0 else []:
            if old != latest:
                self.fs.rm(self._path(old), recursive=True)

    def upload_file(self, path: Path, name: str) -> None:
        self._put(path, self._path(name))

    def download_file(self, name: str, path: Path) -> bool:
        """`<uri>/<name>` to `path`; False when the store has none."""
        try:
            self.fs.get_file(self._path(name), str(path))
        except FileNotFoundError:
            return False
        return True

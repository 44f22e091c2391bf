"""Team API keys: which team a bearer key belongs to.

Keys come from two places: the `team_keys` setting (`{team: key}` in the config file, or
`SEAMLESSFLOW_TEAM_KEYS=team=key,team2=key2`; see `Settings`), and keys issued by `seamlessflow team add`, which are
stored only as
SHA-256 hashes in `<data_dir>/teams.json`. The file is re-read when it changes, so a running proxy sees
new and revoked keys without a restart.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from seamlessflow.config import Settings


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class TeamKeys:
    def __init__(self, path: Path, static: dict[str, str] | None = None):
        self.path = path
        self._static = {hash_key(key): team for team, key in (static or {}).items()}
        self._mtime: float | None = None
        self._stored: dict[str, str] = {}  # hash -> team

    @classmethod
    def from_settings(cls, settings: Settings) -> TeamKeys:
        return cls(Path(settings.data_dir) / "teams.json", settings.team_keys)

    def team_for(self, key: str | None) -> str | None:
        if not key:
            return None
        digest = hash_key(key)
        self._reload()
        for known, team in {**self._stored, **self._static}.items():
            if hmac.compare_digest(known, digest):
                return team
        return None

    def add(self, team: str) -> str:
        """Issues a new key for `team` (a team may hold several); only its hash is stored."""
        key = f"sf-{team}-{secrets.token_urlsafe(24)}"
        data = self._read()
        data.setdefault(team, []).append(hash_key(key))
        self._write(data)
        return key

    def revoke(self, team: str) -> int:
        data = self._read()
        removed = len(data.pop(team, []))
        self._write(data)
        return removed

    def teams(self) -> dict[str, int]:
        """Team -> number of stored keys (static keys from config/env count too)."""
        counts = {team: len(hashes) for team, hashes in self._read().items()}
        for team in self._static.values():
            counts[team] = counts.get(team, 0) + 1
        return counts

    def ensure_default(self, team: str = "default") -> str | None:
        """On the embedded default: a key for `team`, created once and kept readable in the data dir."""
        key_file = self.path.with_name(f"{team}.key")
        if key_file.exists():
            return key_file.read_text().strip()
        key = self.add(team)
        key_file.write_text(key + "\n")
        key_file.chmod(0o600)
        return key

    def _reload(self) -> None:
        try:
            mtime = self.path.stat().st_mtime
        except FileNotFoundError:
            self._stored, self._mtime = {}, None
            return
        if mtime != self._mtime:
            self._stored = {h: team for team, hashes in self._read().items() for h in hashes}
            self._mtime = mtime

    def _read(self) -> dict[str, list[str]]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def _write(self, data: dict[str, list[str]]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=2))
        os.replace(tmp, self.path)

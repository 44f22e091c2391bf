"""How many workers of a pool died holding each task: the retry bound for agents that kill their process.

An agent that raises is retried with `Task.attempt + 1` by the worker itself. One that kills the worker
process (segfault, OOM kill, `os._exit`) cannot be: the task's offset stays uncommitted and Kafka hands it,
unchanged, to the next worker — for ever, since Kafka keeps no delivery count. So each worker notes a task
here before running it and forgets it when the task is finished or handed back in an orderly way (stop,
rebalance, proxy unreachable); a task still noted when it is delivered again was held by a worker that died.

SQLite (stdlib, safe across processes) in the data directory, one file per pool: the count covers the
pool's workers on this host. Workers on other hosts keep their own counts, so there the bound is per host.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path


class DeliveryJournal:
    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, timeout=30, isolation_level=None, check_same_thread=False)
        # one write per task start and end: WAL without fsync per commit keeps that off the poll loop's back,
        # and still survives what it is for (a worker process dying; not the host losing power)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=NORMAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS held (event_id TEXT PRIMARY KEY, deliveries INTEGER NOT NULL)")

    def deliver(self, event_id: str) -> int:
        """Note a task as held by this worker; returns how many workers died holding it before."""
        row = self._db.execute(
            "INSERT INTO held VALUES (?, 1) ON CONFLICT(event_id) DO UPDATE SET deliveries = deliveries + 1 "
            "RETURNING deliveries", (event_id,)).fetchone()
        return row[0] - 1

    def forget(self, *event_ids: str) -> None:
        self._db.executemany("DELETE FROM held WHERE event_id = ?", [(e,) for e in event_ids])

    def close(self) -> None:
        self._db.close()

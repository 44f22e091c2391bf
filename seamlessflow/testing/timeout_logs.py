"""When pytest-timeout stops a test, the end of every log its services wrote, in the test's failure report.

pytest-timeout's `signal` method (the suite's, pyproject.toml) dumps the stack of every other thread of the test's
process into the test's captured output and fails the test with "Timeout (>Ns) from pytest-timeout."; the main
thread's stack is the failure's traceback. What a hang waits on is mostly another process (a broker, an engine, a
trainer), so this plugin adds to that report (a section, which xdist carries to the controller like the captured
output) the last lines of each log file the test's services wrote: the files that the pytest process's
descendants and the processes started during the test (they inherit its PYTEST_CURRENT_TEST; `ray start`'s
daemons are not descendants) hold open for writing, and the log files under pytest's temporary folder written
since the test began (a service that already exited). The services themselves are not signalled: a SIGUSR2 stack
dump in a service, followed by its stop's SIGTERM, once ended in SIGSEGV.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Generator, Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import psutil
import pytest

if TYPE_CHECKING:
    import pluggy

TIMEOUT = "from pytest-timeout"  # in pytest-timeout's failure: "Timeout (>120.0s) from pytest-timeout."
LOG_NAME = re.compile(r"\.(log|out|err)$")
SEGMENT = re.compile(r"^\d+\.log$")  # a Kafka partition's data file, not a log
TAIL_LINES = 40
MOST_FILES = 12
STARTED = pytest.StashKey[float]()


def test_processes(nodeid: str) -> list[psutil.Process]:
    """This process's descendants, and every process started during test `nodeid` (by its PYTEST_CURRENT_TEST)."""
    found = {proc.pid: proc for proc in psutil.Process().children(recursive=True)}
    for proc in psutil.process_iter():
        try:
            if proc.pid not in found and proc.environ().get("PYTEST_CURRENT_TEST", "").startswith(nodeid + " "):
                found[proc.pid] = proc
        except (psutil.Error, OSError):
            continue  # gone, or not ours to read
    return list(found.values())


def is_log(path: Path) -> bool:
    return bool(LOG_NAME.search(path.name)) and not SEGMENT.match(path.name)


def written_logs(processes: Iterable[psutil.Process]) -> set[Path]:
    """Log files the processes hold open for writing (their stdout and stderr are most of them)."""
    paths = set()
    for proc in processes:
        try:
            paths |= {Path(f.path) for f in proc.open_files() if "r" != f.mode and is_log(Path(f.path))}
        except (psutil.Error, OSError):
            continue
    return paths


def recent_logs(root: Path, since: float) -> set[Path]:
    """Log files under `root` modified since `since` (epoch seconds)."""
    found = set()
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder, name)
            try:
                if is_log(path) and path.stat().st_mtime >= since:
                    found.add(path)
            except OSError:
                continue
    return found


def tail(path: Path, lines: int = TAIL_LINES, most_bytes: int = 64 * 1024) -> str | None:
    """The last `lines` lines of a text file (None for a binary one or one gone)."""
    try:
        with path.open("rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - most_bytes))
            chunk = f.read()
    except OSError:
        return None
    if b"\0" in chunk:
        return None
    return "\n".join(chunk.decode(errors="replace").splitlines()[-lines:])


def log_tails(paths: Iterable[Path], most_files: int = MOST_FILES) -> str:
    """Each log's tail under its path, the most recently written first; the ones left out named."""
    def mtime(path: Path) -> float:
        try:
            return path.stat().st_mtime
        except OSError:
            return 0.0

    ordered = sorted(set(paths), key=mtime, reverse=True)
    parts = [f"--- {path} (last {TAIL_LINES} lines)\n{text}" for path in ordered[:most_files]
             if (text := tail(path)) is not None]
    if left := ordered[most_files:]:
        parts.append(f"--- {len(left)} more log(s), older: " + ", ".join(str(path) for path in left))
    return "\n".join(parts) or "no log written by the test's services was found"


class TimeoutLogs:
    """The plugin (`register`)."""

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        item.stash[STARTED] = time.time()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
        outcome = yield
        report = outcome.get_result()
        if not (report.failed and call.excinfo is not None and TIMEOUT in str(call.excinfo.value)):
            return
        since = item.stash.get(STARTED, time.time())
        paths = written_logs(test_processes(item.nodeid))
        basetemp = getattr(item.config, "_tmp_path_factory", None)  # pytest's tmp_path root (per xdist worker)
        if basetemp is not None:
            paths |= recent_logs(basetemp.getbasetemp(), since)
        report.sections.append(("Logs of the test's services at its timeout", log_tails(paths)))


def register(config: pytest.Config) -> None:
    config.pluginmanager.register(TimeoutLogs(), "seamlessflow-timeout-logs")

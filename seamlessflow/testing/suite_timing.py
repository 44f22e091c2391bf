"""The suite's timing table: where `make test`'s time goes, file by file.

A pytest plugin (`register`, called from tests/conftest.py) sums each test file's durations (setup, call and
teardown of each of its tests) and the CPU time spent meanwhile by the test's process and the processes it
started and reaped (engines, brokers, trainers, stacks: their CPU lands in the process's RUSAGE_CHILDREN when
they are waited for), and at the session's end appends one JSON line per file to the file that
SEAMLESSFLOW_TEST_TIMES names. On 2 cores the suite is CPU-bound, so the CPU column says what a file costs the
others running beside it, which its wall time does not. `python -m seamlessflow.testing.suite_timing FILE`
then prints the slowest files.

Why a file of lines and not pytest's `--durations`: `make test` runs the main suite on xdist workers and the
end-to-end files in a pytest process of their own, and the table is across all of them; each run appends its
lines. Under xdist every worker's reports also reach the controller, so only the controller writes.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
from collections import defaultdict
from collections.abc import Generator, Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    import pluggy

ENV = "SEAMLESSFLOW_TEST_TIMES"


@dataclass(frozen=True)
class FileTime:
    file: str  # as in the node ids: relative to the checkout, e.g. tests/e2e/test_ray_loop.py
    tests: int
    seconds: float  # setup + call + teardown, summed over the file's tests
    cpu_seconds: float = 0.0  # the test process's CPU and its reaped children's meanwhile (0: not measured)
    began: float = 0.0  # when its first test began and its last ended (epoch seconds; 0: not recorded): with
    ended: float = 0.0  # `worker`, the main suite's timeline, to see what ran last and on which worker
    worker: str = ""  # the xdist worker that ran it ("" without xdist)
    failures: tuple[str, ...] = ()  # "node id (phase): the crash's message", one per failed phase


CPU = "cpu_s"  # the user property each phase's report carries its CPU seconds in (xdist sends it to the controller)


def cpu_now() -> float:
    """This process's CPU time (every thread) and its waited-for descendants'."""
    own, reaped = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + reaped.ru_utime + reaped.ru_stime


class CpuMeter:
    """Runs in every pytest process (xdist workers too): each phase's report carries the CPU spent since the
    previous report of its test (since the test started, for the setup's)."""

    def __init__(self) -> None:
        self.mark = cpu_now()

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item) -> Generator[None, None, None]:
        self.mark = cpu_now()
        yield

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self) -> Generator[None, pluggy.Result[pytest.TestReport], None]:
        outcome = yield
        now = cpu_now()
        outcome.get_result().user_properties.append((CPU, round(now - self.mark, 3)))
        self.mark = now


def reported_cpu(report: pytest.TestReport) -> float:
    return sum(float(value) for name, value in getattr(report, "user_properties", ()) if name == CPU)


class FileTimes:
    """The plugin: one running sum per file, appended to `path` when the session finishes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seconds: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)
        self.tests: dict[str, set[str]] = defaultdict(set)
        self.spans: dict[str, tuple[float, float, str]] = {}
        self.failures: dict[str, list[str]] = defaultdict(list)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        file = report.nodeid.split("::")[0] or report.location[0]  # the latter for a file outside the rootdir
        self.seconds[file] += report.duration
        self.cpu[file] += reported_cpu(report)
        self.tests[file].add(report.nodeid)
        began, ended, _ = self.spans.get(file, (report.start, report.stop, ""))
        worker = getattr(getattr(getattr(report, "node", None), "gateway", None), "id", "")  # xdist's (controller)
        self.spans[file] = (min(began, report.start), max(ended, report.stop), worker)
        if report.failed:
            self.failures[file].append(f"{report.nodeid} ({report.when}): {crash_message(report)}")

    def pytest_sessionfinish(self) -> None:
        if not self.seconds:
            return
        rows = [FileTime(file, len(self.tests[file]), round(seconds, 3), round(self.cpu[file], 3),
                         *self.spans[file], tuple(self.failures[file])) for file, seconds in self.seconds.items()]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            out.writelines(json.dumps(asdict(row)) + "\n" for row in rows)


def crash_message(report: pytest.TestReport, limit: int = 300) -> str:
    """The crash's one line (pytest's `E ...` line, or the last line of the report), cut to `limit`."""
    crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
    text = getattr(crash, "message", "") or next(
        (line for line in reversed(report.longreprtext.splitlines()) if line.strip()), "")
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit - 3] + "..."


def register(config: pytest.Config) -> None:
    """Adds the plugins where SEAMLESSFLOW_TEST_TIMES is set: the CPU meter in every process, the file's sums
    except in an xdist worker (the controller writes)."""
    path = os.environ.get(ENV)
    if not path:
        return
    config.pluginmanager.register(CpuMeter(), "seamlessflow-suite-cpu")
    if not hasattr(config, "workerinput"):
        config.pluginmanager.register(FileTimes(Path(path)), "seamlessflow-suite-timing")


def aggregate(lines: Iterable[str]) -> list[FileTime]:
    """One row per file, slowest first; a file that appears in several runs adds up."""
    seconds: dict[str, float] = defaultdict(float)
    cpu: dict[str, float] = defaultdict(float)
    tests: dict[str, int] = defaultdict(int)
    for line in lines:
        if line.strip():
            row = FileTime(**json.loads(line))  # a run's lines; began/ended/worker/failures are not summed
            seconds[row.file] += row.seconds
            cpu[row.file] += row.cpu_seconds
            tests[row.file] += row.tests
    return sorted((FileTime(file, tests[file], seconds[file], cpu[file]) for file in seconds),
                  key=lambda row: (-row.seconds, row.file))


def table(rows: list[FileTime], top: int = 10) -> str:
    total_s, total_tests = sum(row.seconds for row in rows), sum(row.tests for row in rows)
    total_cpu = sum(row.cpu_seconds for row in rows)
    lines = [f"The {min(top, len(rows))} slowest test files of {len(rows)} ({total_tests} tests, "
             f"{total_s:.0f} s of test time and {total_cpu:.0f} CPU-s in all; xdist workers' time adds up; "
             "CPU-s: the test process and the processes it reaped):",
             f"{'seconds':>9}  {'CPU-s':>7}  {'tests':>5}  file"]
    lines += [f"{row.seconds:9.1f}  {row.cpu_seconds:7.1f}  {row.tests:5d}  {row.file}" for row in rows[:top]]
    return "\n".join(lines)


def last_to_end(lines: Iterable[str], count: int = 8) -> str:
    """The files that ended last, each with its worker and its span in minutes since the first file began: where
    a worker ran on alone at the end of the main suite (a long file scheduled last). The main suite's files
    (those an xdist worker ran) where there are any, not the end-to-end files run apart."""
    rows = [FileTime(**json.loads(line)) for line in lines if line.strip()]
    rows = [row for row in rows if row.ended]
    rows = [row for row in rows if row.worker] or rows
    if not rows:
        return ""  # lines of an older run
    start = min(row.began for row in rows)
    out = [f"The {min(count, len(rows))} files that ended last (minutes since the first began):"]
    out += [f"  {row.worker or '-':>4}  {(row.began - start) / 60:6.1f} - {(row.ended - start) / 60:6.1f}  {row.file}"
            for row in sorted(rows, key=lambda row: row.ended)[-count:]]
    return "\n".join(out)


def failures(lines: Iterable[str]) -> str:
    """Every failed phase of every run, printed last: CI shows the end of the output, and `-ra`'s summary of the
    main suite comes before the end-to-end files' output and the tables."""
    failed = [failure for line in lines if line.strip() for failure in json.loads(line).get("failures", ())]
    if not failed:
        return ""
    return "\n".join([f"The {len(failed)} failed test phases of these runs:"] + [f"  FAILED {f}" for f in failed])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Print the slowest test files from the suite's timing lines.")
    parser.add_argument("file", type=Path, help=f"the JSON-lines file that {ENV} named")
    parser.add_argument("--top", type=int, default=10)
    args = parser.parse_args(argv)
    lines = args.file.read_text().splitlines() if args.file.exists() else []
    rows = aggregate(lines)
    print(table(rows, args.top) if rows else f"no test timings in {args.file}")
    if tail := last_to_end(lines) if rows else "":
        print(tail)
    if failed := failures(lines):
        print(failed)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

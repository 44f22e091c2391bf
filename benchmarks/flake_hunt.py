"""Run chosen tests many times, each run a fresh pytest, and count who passed, failed or hung:
`python benchmarks/flake_hunt.py --runs 4 --burn 2 tests/weights/test_token_versions.py`.

Why: a flaky test fails one CI run in ten on a busy machine and passes when rerun alone. This runs the same tests
N times the way `make test` runs them (the venv's python, bytecode under the venv, SEAMLESSFLOW_TEST_TIMES set,
no cache provider), optionally beside K busy processes (`--burn K`) so the machine is as full as CI's (the suite
keeps ~1.8 of its 2 cores busy), and prints one row per test: passes, failures, hangs, and the min / median /
max of its duration (setup + call + teardown, pytest's junit xml). A hang is a test pytest-timeout stopped, or a
run still going at `--timeout` seconds: then pytest gets SIGINT (it writes its junit xml for what finished),
its process group is killed, and the test it was in (the first collected one the xml lacks) counts as hung.
Each run's output, and a failed run's pytest temporary folder (`--basetemp`: the logs of the services its tests
started), are kept in a folder printed at the end (removed when every run passed).

Anything after `--` goes to pytest as is (`-- -x -k name`). `--markdown` prints the table for the benchmarks page.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TIMEOUT_MARK = "from pytest-timeout"  # pytest-timeout's failure message: "Timeout (>120.0s) from pytest-timeout."
PASSED, FAILED, HUNG, SKIPPED = "passed", "failed", "hung", "skipped"
XDIST_GROUP = re.compile(r"@[^@\]]*$")


@dataclass(frozen=True)
class Outcome:
    test: str  # a node id where the collected ids name it, else junit's "classname::name"
    status: str  # PASSED, FAILED, HUNG or SKIPPED
    seconds: float  # setup + call + teardown
    message: str = ""  # the first line of what failed


def junit_key(nodeid: str) -> str:
    """The "classname::name" pytest's junit xml gives a node id (as its `mangle_test_address` does)."""
    path, bracket, params = nodeid.partition("[")
    names = path.split("::")
    names[0] = re.sub(r"\.py$", "", names[0].replace("/", "."))
    return ".".join(names[:-1]) + "::" + names[-1] + bracket + params


def parse_junit(text: str, nodeids: Iterable[str] = ()) -> list[Outcome]:
    """Each testcase of a junit xml as an Outcome, named by its node id where `nodeids` holds it."""
    by_key = {junit_key(nodeid): nodeid for nodeid in nodeids}
    outcomes = []
    for case in ET.fromstring(text).iter("testcase"):
        name = XDIST_GROUP.sub("", case.get("name", ""))  # `--dist loadgroup` names a test "name@group"
        key = f"{case.get('classname', '')}::{name}"
        bad = [child for child in case if child.tag in ("failure", "error")]
        said = " ".join(f"{child.get('message', '')} {child.text or ''}" for child in bad)
        if bad:
            status = HUNG if TIMEOUT_MARK in said else FAILED
        else:
            status = SKIPPED if case.find("skipped") is not None else PASSED
        first = (bad[0].get("message") or bad[0].text or "") if bad else ""
        message = next((line.strip() for line in first.splitlines() if line.strip()), "")
        outcomes.append(Outcome(by_key.get(key, key), status, float(case.get("time") or 0), message[:200]))
    return outcomes


def hung_in(nodeids: Sequence[str], finished: Iterable[Outcome]) -> str | None:
    """The test a run stopped in: the first collected one without an outcome (None when all have one)."""
    done = {outcome.test for outcome in finished}
    return next((nodeid for nodeid in nodeids if nodeid not in done), None)


@dataclass
class Row:
    test: str
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys((PASSED, FAILED, HUNG, SKIPPED), 0))
    seconds: list[float] = field(default_factory=list)


def tally(outcomes: Iterable[Outcome]) -> list[Row]:
    """One row per test, in the order first seen; durations of the runs that were not skipped."""
    rows: dict[str, Row] = {}
    for outcome in outcomes:
        row = rows.setdefault(outcome.test, Row(outcome.test))
        row.counts[outcome.status] += 1
        if outcome.status != SKIPPED:
            row.seconds.append(outcome.seconds)
    return list(rows.values())


HEADER = ("test", "passed", "failed", "hung", "skipped", "min s", "median s", "max s")


def cells(row: Row) -> list[str]:
    times = [f"{t:.2f}" if t < 10 else f"{t:.1f}" for t in
             (min(row.seconds), statistics.median(row.seconds), max(row.seconds))] if row.seconds else ["-"] * 3
    return [row.test, *(str(row.counts[status]) for status in (PASSED, FAILED, HUNG, SKIPPED)), *times]


def markdown(rows: Sequence[Row]) -> str:
    """The table as the benchmarks page writes tables."""
    lines = ["| " + " | ".join(HEADER) + " |", "| " + " | ".join(["---"] * len(HEADER)) + " |"]
    lines += ["| " + " | ".join(cells(row)) + " |" for row in rows]
    return "\n".join(lines)


def print_table(rows: Sequence[Row], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(*HEADER, title=title, title_justify="left")
    table.columns[0].overflow = "fold"  # whole node ids, to paste into the next run
    for column in table.columns[1:]:
        column.justify = "right"
    for row in rows:
        table.add_row(*cells(row), style="red" if row.counts[FAILED] or row.counts[HUNG] else None)
    Console(width=max(120, shutil.get_terminal_size().columns)).print(table)


# -- running --------------------------------------------------------------------------------------------------

def python() -> str:
    venv = ROOT / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def test_environment(times_file: Path) -> dict[str, str]:
    """What `make test` gives its pytest (the Makefile): bytecode kept under the venv, the timing lines on."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(ROOT / ".venv" / "pycache")
    env["SEAMLESSFLOW_TEST_TIMES"] = str(times_file)
    # this checkout's code first, in the processes the tests start too: the same as the venv's editable install
    # here, and the hunted code in a `git worktree` run with another checkout's venv
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    return env


def collect(targets: Sequence[str], extra: Sequence[str], env: dict[str, str]) -> list[str]:
    """The node ids the runs will run, in order (to name the test a killed run was in)."""
    done = subprocess.run([python(), "-m", "pytest", "-p", "no:cacheprovider", "--collect-only", "-q",
                           *targets, *extra], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    listed = done.stdout.split("\n\n")[0].splitlines()  # `-q` lists the ids, a blank line, then the summary
    nodeids = [line.strip() for line in listed if "::" in line]
    if not nodeids:
        raise SystemExit(f"no tests collected from {' '.join(targets)}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}")
    return nodeids


@contextmanager
def burners(count: int) -> Iterator[list[subprocess.Popen]]:
    """`count` processes that each keep a core busy, for as long as the block runs (also on Ctrl-C)."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        yield procs
    finally:
        for proc in procs:
            proc.kill()
        for proc in procs:
            proc.wait()


def kill_group(proc: subprocess.Popen, grace_s: float = 30) -> None:
    """SIGINT to pytest (it writes its junit xml for what finished), then SIGKILL to its whole process group."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(grace_s)
        except subprocess.TimeoutExpired:
            pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # what it started and left (engines, brokers) goes too
    except ProcessLookupError:
        pass
    proc.wait()


def run_once(index: int, targets: Sequence[str], extra: Sequence[str], nodeids: Sequence[str], work: Path,
             env: dict[str, str], timeout_s: float) -> tuple[list[Outcome], int | None, float]:
    """One fresh pytest; its outcomes, its exit code (None: killed at the timeout) and its wall seconds."""
    xml, log, tmp = work / f"run-{index}.xml", work / f"run-{index}.log", work / f"run-{index}-tmp"
    argv = [python(), "-m", "pytest", "-p", "no:cacheprovider", "-q", "-ra", f"--junitxml={xml}", f"--basetemp={tmp}",
            *targets, *extra]
    began = time.monotonic()
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            code: int | None = proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            code = None
        finally:
            kill_group(proc)  # also on Ctrl-C; a run that ended leaves no group to kill but its strays
    wall = time.monotonic() - began
    outcomes = parse_junit(xml.read_text(), nodeids) if xml.exists() and xml.stat().st_size else []
    if code is None and (test := hung_in(nodeids, outcomes)) is not None:
        lasted = wall - sum(o.seconds for o in outcomes)
        outcomes.append(Outcome(test, HUNG, lasted, f"the run was killed at {timeout_s:.0f} s"))
    if code == 0:
        shutil.rmtree(tmp, ignore_errors=True)  # a failed run's stays: its services' logs (engines, brokers, ...)
    return outcomes, code, wall


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Example: python benchmarks/flake_hunt.py --runs 4 --burn 2 tests/core/test_batching.py "
               "'tests/broker/test_cluster.py::test_name' -- -x   (after --: passed to pytest)")
    parser.add_argument("targets", nargs="+", help="test files or node ids, as pytest takes them")
    parser.add_argument("--runs", type=int, default=5, help="how many runs (default 5)")
    parser.add_argument("--burn", type=int, default=0, metavar="K",
                        help="K busy processes beside the runs (2 on a 2-core machine: about CI's load)")
    parser.add_argument("--timeout", type=float, default=1800, metavar="S",
                        help="a run still going after S seconds is a hang: stopped, its test counted hung "
                             "(default 1800; pytest-timeout stops a single test sooner)")
    parser.add_argument("--markdown", action="store_true", help="also print the table as markdown")
    args = parser.parse_args(argv[: argv.index("--")] if "--" in argv else argv)

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # the burners and the run's group go then too
    work = Path(tempfile.mkdtemp(prefix="flake-hunt-"))
    env = test_environment(work / "test-times.jsonl")
    nodeids = collect(args.targets, extra, env)
    outcomes: list[Outcome] = []
    walls: list[float] = []
    print(f"{len(nodeids)} test(s), {args.runs} run(s), {args.burn} burner(s); runs' output in {work}", flush=True)
    with burners(args.burn):
        for index in range(1, args.runs + 1):
            found, code, wall = run_once(index, args.targets, extra, nodeids, work, env, args.timeout)
            outcomes += found
            walls.append(wall)
            bad = [o for o in found if o.status in (FAILED, HUNG)]
            print(f"run {index}: exit {'killed' if code is None else code} in {wall:.0f} s"
                  + "".join(f"\n  {o.status}: {o.test}: {o.message}" for o in bad), flush=True)
    rows = tally(outcomes)
    title = (f"{args.runs} run(s) beside {args.burn} burner(s), {os.cpu_count()} cores; wall per run "
             f"{min(walls):.0f}-{max(walls):.0f} s")
    print_table(rows, title)
    if args.markdown:
        print(f"\n{title}\n\n{markdown(rows)}")
    clean = all(o.status in (PASSED, SKIPPED) for o in outcomes) and len(outcomes) >= len(nodeids) * args.runs
    if clean:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"runs' output kept in {work}")
    return 0 if clean else 1


if __name__ == "__main__":
    raise SystemExit(main())

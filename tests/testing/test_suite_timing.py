"""The suite's timing table: each file's durations summed over its tests' phases, runs added up, slowest first;
under xdist the controller alone writes, each test counted once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

from seamlessflow.testing.suite_timing import ENV, FileTime, FileTimes, aggregate, main, table


def report(nodeid: str, duration: float) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, duration=duration)


def test_the_plugin_sums_every_phase_of_every_test_of_a_file(tmp_path):
    times = FileTimes(tmp_path / "times.jsonl")
    for nodeid, phases in {"tests/a.py::t1": (0.5, 2.0, 0.25), "tests/a.py::t2[x]": (0.0, 1.0, 0.0),
                           "tests/b.py::C::t": (0.125, 0.125, 0.0)}.items():
        for duration in phases:
            times.pytest_runtest_logreport(report(nodeid, duration))
    times.pytest_sessionfinish()
    lines = (tmp_path / "times.jsonl").read_text().splitlines()
    assert sorted(json.loads(line)["file"] for line in lines) == ["tests/a.py", "tests/b.py"]
    assert aggregate(lines) == [FileTime("tests/a.py", 2, 3.75), FileTime("tests/b.py", 1, 0.25)]


def test_runs_add_up_per_file_and_the_slowest_come_first():
    main_run = [json.dumps({"file": "tests/a.py", "tests": 3, "seconds": 5.0}),
                json.dumps({"file": "tests/b.py", "tests": 1, "seconds": 9.0}), ""]
    e2e_runs = [json.dumps({"file": "tests/e2e/test_loop.py", "tests": 2, "seconds": 60.0}),
                json.dumps({"file": "tests/a.py", "tests": 3, "seconds": 5.0})]
    rows = aggregate(main_run + e2e_runs)
    assert rows == [FileTime("tests/e2e/test_loop.py", 2, 60.0), FileTime("tests/a.py", 6, 10.0),
                    FileTime("tests/b.py", 1, 9.0)]
    printed = table(rows, top=2).splitlines()
    assert printed[0].startswith("The 2 slowest test files of 3 (9 tests, 79 s")
    assert [line.split() for line in printed[2:]] == [["60.0", "2", "tests/e2e/test_loop.py"],
                                                     ["10.0", "6", "tests/a.py"]]


def test_the_script_prints_the_table_and_says_when_there_is_none(tmp_path, capsys):
    missing = tmp_path / "none.jsonl"
    assert main([str(missing)]) == 0
    assert capsys.readouterr().out == f"no test timings in {missing}\n"
    found = tmp_path / "times.jsonl"
    found.write_text(json.dumps({"file": "tests/a.py", "tests": 1, "seconds": 1.5}) + "\n")
    assert main([str(found)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["1.5", "1", "tests/a.py"]


def test_under_xdist_only_the_controller_writes_and_each_test_counts_once(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "from seamlessflow.testing import suite_timing\n\n\n"
        "def pytest_configure(config):\n    suite_timing.register(config)\n")
    (suite / "test_one.py").write_text("import pytest\n\n\n@pytest.mark.parametrize('i', range(3))\n"
                                       "def test_it(i):\n    pass\n")
    (suite / "test_two.py").write_text("def test_it():\n    pass\n")
    times = tmp_path / "times.jsonl"
    # xdist alone of the installed plugins: loading them all took most of this test's time
    env = {**os.environ, ENV: str(times), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    argv = [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-n", "1", "-q", "-p", "no:cacheprovider", str(suite)]
    done = subprocess.run(argv, cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = times.read_text().splitlines()
    assert len(lines) == 2, lines  # one line per file, from one process
    assert {(row.file, row.tests) for row in aggregate(lines)} == {("test_one.py", 3), ("test_two.py", 1)}

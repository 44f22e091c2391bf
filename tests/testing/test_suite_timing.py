"""The suite's timing table: each file's durations and CPU summed over its tests' phases, runs added up, slowest
first; under xdist the controller alone writes, each test counted once, with the CPU its worker measured."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from types import SimpleNamespace

from seamlessflow.testing.suite_timing import ENV, FileTime, FileTimes, aggregate, failures, last_to_end, main, table


def report(nodeid: str, duration: float) -> SimpleNamespace:
    return SimpleNamespace(nodeid=nodeid, duration=duration, start=100.0, stop=100.0 + duration, failed=False)


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
    assert {(row["began"], row["ended"]) for row in map(json.loads, lines)} == {(100.0, 102.0), (100.0, 100.125)}


def test_runs_add_up_per_file_and_the_slowest_come_first():
    main_run = [json.dumps({"file": "tests/a.py", "tests": 3, "seconds": 5.0, "cpu_seconds": 2.0}),
                json.dumps({"file": "tests/b.py", "tests": 1, "seconds": 9.0}), ""]  # a line from before CPU
    e2e_runs = [json.dumps({"file": "tests/e2e/test_loop.py", "tests": 2, "seconds": 60.0, "cpu_seconds": 90.0}),
                json.dumps({"file": "tests/a.py", "tests": 3, "seconds": 5.0, "cpu_seconds": 1.5})]
    rows = aggregate(main_run + e2e_runs)
    assert rows == [FileTime("tests/e2e/test_loop.py", 2, 60.0, 90.0), FileTime("tests/a.py", 6, 10.0, 3.5),
                    FileTime("tests/b.py", 1, 9.0, 0.0)]
    printed = table(rows, top=2).splitlines()
    assert printed[0].startswith("The 2 slowest test files of 3 (9 tests, 79 s of test time and 94 CPU-s")
    assert [line.split() for line in printed[2:]] == [["60.0", "90.0", "2", "tests/e2e/test_loop.py"],
                                                     ["10.0", "3.5", "6", "tests/a.py"]]


def test_the_script_prints_the_table_and_says_when_there_is_none(tmp_path, capsys):
    missing = tmp_path / "none.jsonl"
    assert main([str(missing)]) == 0
    assert capsys.readouterr().out == f"no test timings in {missing}\n"
    found = tmp_path / "times.jsonl"
    found.write_text(json.dumps({"file": "tests/a.py", "tests": 1, "seconds": 1.5}) + "\n")
    assert main([str(found)]) == 0
    assert capsys.readouterr().out.splitlines()[-1].split() == ["1.5", "0.0", "1", "tests/a.py"]


def test_under_xdist_only_the_controller_writes_and_each_test_counts_once_with_its_cpu(tmp_path):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text(
        "from seamlessflow.testing import suite_timing\n\n\n"
        "def pytest_configure(config):\n    suite_timing.register(config)\n")
    (suite / "test_one.py").write_text("import pytest\n\n\n@pytest.mark.parametrize('i', range(3))\n"
                                       "def test_it(i):\n    pass\n")
    spin = "import time\n\n\ndef test_it():\n    t = time.process_time()\n    while time.process_time() - t < 0.5:\n" \
           "        pass\n"
    (suite / "test_two.py").write_text(spin)
    child = ("import subprocess\nimport sys\n\n\ndef test_it():\n"
             f"    subprocess.run([sys.executable, '-c', {spin + 'test_it()'!r}], check=True)\n")
    (suite / "test_three.py").write_text(child)
    (suite / "test_four.py").write_text("def test_it():\n    assert 1 + 1 == 3, 'the sum is off'\n")
    times = tmp_path / "times.jsonl"
    # xdist alone of the installed plugins: loading them all took most of this test's time
    env = {**os.environ, ENV: str(times), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    argv = [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-n", "1", "-q", "-p", "no:cacheprovider", str(suite)]
    done = subprocess.run(argv, cwd=suite, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr  # test_four fails
    lines = times.read_text().splitlines()
    assert len(lines) == 4, lines  # one line per file, from one process
    rows = {row.file: row for row in aggregate(lines)}
    assert {file: row.tests for file, row in rows.items()} == {"test_one.py": 3, "test_two.py": 1, "test_three.py": 1,
                                                               "test_four.py": 1}
    assert 0.5 <= rows["test_two.py"].cpu_seconds < 5, rows  # a worker's CPU reaches the controller
    assert 0.5 <= rows["test_three.py"].cpu_seconds < 5, rows  # and a process the test started and waited for
    spans = [FileTime(**json.loads(line)) for line in lines]
    assert all(row.worker == "gw0" and 0 < row.began <= row.ended for row in spans), spans  # the timeline's
    assert "test_three.py" in last_to_end(lines) and "gw0" in last_to_end(lines)
    # the failure, with its message, printed last (CI shows the output's end), as the worker reported it
    assert failures(lines).splitlines() == ["The 1 failed test phases of these runs:",
                                            "  FAILED test_four.py::test_it (call): AssertionError: the sum is off "
                                            "assert (1 + 1) == 3"]

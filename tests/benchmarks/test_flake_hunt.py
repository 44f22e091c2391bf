"""`benchmarks/flake_hunt.py`'s pure parts: pytest's junit xml read back into outcomes by node id, and the table."""

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from flake_hunt import FAILED, HUNG, PASSED, SKIPPED, Outcome, hung_in, junit_key, markdown, parse_junit, tally  # noqa: E402

# As pytest 9 wrote it for a file of: a pass, a failed assert, a pytest-timeout stop, a skip, a class's two
# parametrized tests, and a test whose fixture failed in teardown.
JUNIT = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests"><testsuite name="pytest" errors="1"
failures="2" skipped="1" tests="7" time="1.174"><testcase classname="tests.x.test_x" name="test_ok" time="0.25" />
<testcase classname="tests.x.test_x" name="test_bad" time="0.001"><failure message="assert 1 == 2">&gt;   def
test_bad(): assert 1 == 2
E   assert 1 == 2</failure></testcase>
<testcase classname="tests.x.test_x" name="test_slow" time="120.054"><failure
message="Failed: Timeout (&gt;120.0s) from pytest-timeout.">E   Failed: Timeout</failure></testcase>
<testcase classname="tests.x.test_x" name="test_skip" time="0.000"><skipped type="pytest.skip" message="no">x</skipped>
</testcase><testcase classname="tests.x.test_x.TestK" name="test_p[1-a]" time="0.001" />
<testcase classname="tests.x.test_x.TestK" name="test_p[2-b]" time="0.002" />
<testcase classname="tests.x.test_x" name="test_td" time="0.005"><error
message="failed on teardown with &quot;RuntimeError: teardown&quot;">E RuntimeError</error></testcase>
</testsuite></testsuites>"""
IDS = ["tests/x/test_x.py::test_ok", "tests/x/test_x.py::test_bad", "tests/x/test_x.py::test_slow",
       "tests/x/test_x.py::test_skip", "tests/x/test_x.py::TestK::test_p[1-a]", "tests/x/test_x.py::TestK::test_p[2-b]",
       "tests/x/test_x.py::test_td", "tests/x/test_x.py::test_never"]


def test_node_ids_map_to_junit_names_as_pytest_mangles_them():
    assert junit_key("tests/x/test_x.py::TestK::test_p[1-a]") == "tests.x.test_x.TestK::test_p[1-a]"
    assert junit_key("tests/x/test_x.py::test_p[a/b.py]") == "tests.x.test_x::test_p[a/b.py]"  # params untouched


def test_junit_xml_is_read_into_outcomes_by_node_id():
    outcomes = parse_junit(JUNIT, IDS)
    assert [(o.test.split("::", 1)[1], o.status) for o in outcomes] == [
        ("test_ok", PASSED), ("test_bad", FAILED), ("test_slow", HUNG), ("test_skip", SKIPPED),
        ("TestK::test_p[1-a]", PASSED), ("TestK::test_p[2-b]", PASSED), ("test_td", FAILED)]
    assert outcomes[0].seconds == 0.25 and outcomes[2].seconds == 120.054
    assert outcomes[1].message == "assert 1 == 2"
    assert outcomes[2].message == "Failed: Timeout (>120.0s) from pytest-timeout."
    assert parse_junit(JUNIT)[4].test == "tests.x.test_x.TestK::test_p[1-a]"  # no ids collected: junit's name
    grouped = JUNIT.replace('name="test_ok"', 'name="test_ok@tests/x/test_x.py"').replace("[2-b]", "[2-b]@vllm")
    assert [o.test for o in parse_junit(grouped, IDS)] == IDS[:7]  # xdist's --dist loadgroup suffix


def test_a_killed_run_names_the_first_collected_test_it_did_not_finish():
    done = parse_junit(JUNIT, IDS)
    assert hung_in(IDS, done) == "tests/x/test_x.py::test_never"
    assert hung_in(IDS[:3], done) is None
    assert hung_in(IDS, done[:2]) == "tests/x/test_x.py::test_slow"


def test_runs_are_tallied_per_test_and_printed_as_markdown():
    runs = [Outcome("a", PASSED, 2.0), Outcome("b", SKIPPED, 0.0), Outcome("a", FAILED, 4.0),
            Outcome("a", PASSED, 3.0), Outcome("a", HUNG, 120.0), Outcome("b", SKIPPED, 0.0),
            Outcome("c", PASSED, 0.014)]
    rows = tally(runs)
    assert [(row.test, row.counts) for row in rows] == [
        ("a", {PASSED: 2, FAILED: 1, HUNG: 1, SKIPPED: 0}), ("b", {PASSED: 0, FAILED: 0, HUNG: 0, SKIPPED: 2}),
        ("c", {PASSED: 1, FAILED: 0, HUNG: 0, SKIPPED: 0})]
    assert markdown(rows).splitlines() == [
        "| test | passed | failed | hung | skipped | min s | median s | max s |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
        "| a | 2 | 1 | 1 | 0 | 2.00 | 3.50 | 120.0 |",
        "| b | 0 | 0 | 0 | 2 | - | - | - |",
        "| c | 1 | 0 | 0 | 0 | 0.01 | 0.01 | 0.01 |",
    ]

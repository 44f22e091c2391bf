import json

from click.testing import CliRunner

from seamlessflow.cli.simulate import simulate

SMALL = ["--gpus", "8", "--steps", "2", "--seed", "3"]


def test_simulate_json_reports_each_policy_side_by_side():
    result = CliRunner().invoke(simulate, [*SMALL, "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert sorted(report["policies"]) == ["colocated", "disaggregated", "multiplexed"]
    for figures in report["policies"].values():
        assert figures["throughput"] > 0
        assert 0.0 <= figures["bubble_ratio"] < 1.0
        assert figures["staleness"] >= 0.0
    assert report["policies"]["colocated"]["staleness"] == 0.0
    assert report["policies"]["colocated"]["speedup_vs_colocated"] == 1.0


def test_simulate_runs_only_the_policies_asked_for_and_writes_a_timeline(tmp_path):
    png = tmp_path / "timeline.png"
    args = [*SMALL, "--policy", "multiplexed", "--policy", "colocated", "--png", str(png), "--json"]
    result = CliRunner().invoke(simulate, args)
    assert result.exit_code == 0, result.output
    assert sorted(json.loads(result.output)["policies"]) == ["colocated", "multiplexed"]
    assert png.read_bytes()[:4] == b"\x89PNG"


def test_simulate_prints_a_table_and_refuses_unknown_policies():
    table = CliRunner().invoke(simulate, [*SMALL, "--policy", "multiplexed"])
    assert table.exit_code == 0 and "multiplexed" in table.output and "bubble" in table.output
    unknown = CliRunner().invoke(simulate, [*SMALL, "--policy", "round-robin"])
    assert unknown.exit_code != 0

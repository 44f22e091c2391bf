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


def test_simulate_hetero_reports_affinity_against_blind_with_the_hardware_used():
    args = ["--hetero", "--cluster", "12xh100:train,2xh100,4xh20", "--steps", "2"]
    report = json.loads(CliRunner().invoke(simulate, [*args, "--json"]).output)
    assert sorted(report["routings"]) == ["affinity", "blind", "least-loaded"]
    seconds = {name: figures["seconds"] for name, figures in report["routings"].items()}
    assert report["affinity_speedup_vs_blind"] == round(seconds["blind"] / seconds["affinity"], 4)
    assert "989 TFLOP/s" in report["cluster"][0] and "4 TB/s" in report["cluster"][2]
    table = CliRunner().invoke(simulate, args)
    assert table.exit_code == 0 and "sooner than tag-blind hashing" in table.output and "H20" in table.output
    bad = CliRunner().invoke(simulate, ["--hetero", "--cluster", "4xv100"])
    assert bad.exit_code != 0 and "bad pool" in bad.output

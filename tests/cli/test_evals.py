"""`seamlessflow evals` on eval records through the real broker: one row per version, the last record wins."""

import json

from click.testing import CliRunner

from seamlessflow.cli.evals import evals
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import EvalResult
from seamlessflow.topics import Topics


def result(settings, version, accuracy, published_at, run=None, team=None):
    return EvalResult(f"e{version}-{published_at}", version, "demo", accuracy, accuracy + 0.1, 7.0, 64,
                      team or settings.team, run or settings.run, published_at - 5, published_at)


def test_evals_prints_a_row_per_version_and_draws_the_curve(settings, codec, tmp_path):
    producer = MessageProducer(settings, codec)
    for record in (result(settings, 0, 0.1, 1000), result(settings, 10, 0.5, 2000), result(settings, 10, 0.6, 3000),
                   result(settings, 20, 0.9, 4000), result(settings, 30, 0.0, 5000, run="other-run"),
                   result(settings, 3, 0.25, 6000, team="red"), result(settings, 4, 0.5, 7000, team="red")):
        producer.send(Topics(settings).eval, record.run, record)
    producer.flush()
    png = tmp_path / "eval.png"
    out = CliRunner().invoke(evals, ["--out", str(png), "--json"], obj=settings)
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.output.splitlines()]
    assert [(r["version"], r["accuracy"]) for r in rows] == [(0, 0.1), (10, 0.6), (20, 0.9)]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    red = CliRunner().invoke(evals, ["--out", str(png), "--json", "--team", "red"], obj=settings)  # its adapter's
    assert red.exit_code == 0, red.output
    assert [(r["version"], r["accuracy"]) for r in map(json.loads, red.output.splitlines())] == [(3, 0.25), (4, 0.5)]


def test_evals_without_records_says_so(settings, tmp_path):
    out = CliRunner().invoke(evals, ["--out", str(tmp_path / "e.png")], obj=settings)
    assert out.exit_code != 0 and "no eval records" in out.output


def test_figures_recomputed_from_recorded_eval_sessions_pin_each_pass_to_one_version():
    from seamlessflow.cli.evals import pinned_from_sessions
    from seamlessflow.core.evaluation import eval_group_id
    from seamlessflow.messages import EpisodeEnd, TokenIO

    def session(sid, group_id, reward, versions, at):
        call = TokenIO(
            f"{sid}.c",
            sid,
            "default",
            "r",
            f"{sid}-c",
            "e",
            0,
            [1],
            [2] * len(versions),
            [0.0] * len(versions),
            list(versions),
            "stop",
            0.0,
            0.0,
            0.0,
            at,
        )
        end = EpisodeEnd(f"{sid}.end", sid, "default", "r", reward, "done", "{}", 1, at + 1, group_id, "t")
        return [call, end]

    records = []
    for i, (reward, versions) in enumerate([(1.0, [3, 3]), (0.0, [3]), (1.0, [3, 4]), (1.0, [4])]):  # pass begun on v3
        records += session(f"a{i}", eval_group_id("r", 3, f"t{i}"), reward, versions, 100 + i)
    for i, versions in enumerate([[8], [9], [7]]):  # pass begun on v7: no version made half of it
        records += session(f"b{i}", eval_group_id("r", 7, f"t{i}"), 1.0, versions, 200 + i)
    records += session("train", "r.t0.r0", 1.0, [5], 300)  # a training session: not an eval
    [result] = pinned_from_sessions(records, "default", "r")
    assert (result.version, result.samples, result.accuracy, result.mean_reward) == (3, 2, 0.5, 0.5)
    assert result.mean_length == 1.5 and (result.created_at_ms, result.published_at) == (
        101,
        104,
    )  # first and last end of the pass

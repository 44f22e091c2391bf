"""`seamlessflow evals` on eval records through the real broker: one row per version, the last record wins."""

import json

from click.testing import CliRunner

from seamlessflow.cli.evals import evals
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.messages import EvalResult
from seamlessflow.topics import Topics


def result(settings, version, accuracy, published_at, run=None):
    return EvalResult(f"e{version}-{published_at}", version, "demo", accuracy, accuracy + 0.1, 7.0, 64,
                      settings.team, run or settings.run, published_at - 5, published_at)


def test_evals_prints_a_row_per_version_and_draws_the_curve(settings, codec, tmp_path):
    producer = MessageProducer(settings, codec)
    for record in (result(settings, 0, 0.1, 1000), result(settings, 10, 0.5, 2000), result(settings, 10, 0.6, 3000),
                   result(settings, 20, 0.9, 4000), result(settings, 30, 0.0, 5000, run="other-run")):
        producer.send(Topics(settings).eval, record.run, record)
    producer.flush()
    png = tmp_path / "eval.png"
    out = CliRunner().invoke(evals, ["--out", str(png), "--json"], obj=settings)
    assert out.exit_code == 0, out.output
    rows = [json.loads(line) for line in out.output.splitlines()]
    assert [(r["version"], r["accuracy"]) for r in rows] == [(0, 0.1), (10, 0.6), (20, 0.9)]
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_evals_without_records_says_so(settings, tmp_path):
    out = CliRunner().invoke(evals, ["--out", str(tmp_path / "e.png")], obj=settings)
    assert out.exit_code != 0 and "no eval records" in out.output

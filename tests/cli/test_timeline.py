"""`seamlessflow timeline` on recorded statuses through the real broker."""

import json

from click.testing import CliRunner

from seamlessflow.cli.timeline import timeline
from seamlessflow.kafka.io import MessageProducer
from seamlessflow.testing.status_records import two_resource_run
from seamlessflow.topics import Topics


def record(settings, codec):
    producer = MessageProducer(settings, codec)
    for message in two_resource_run():
        key = message.resource_id if not hasattr(message, "outcome") else f"{message.resource_id}/ack"
        producer.send(Topics(settings).status, key, message)
    producer.flush()


def test_timeline_draws_png_and_prints_bubble_ratio(settings, codec, tmp_path):
    record(settings, codec)
    png = tmp_path / "timeline.png"
    result = CliRunner().invoke(timeline, ["--out", str(png)], obj=settings)
    assert result.exit_code == 0, result.output
    assert "bubble ratio: 15.0% over 2 devices, 2 role switches" in result.output
    assert "waiting for data" not in result.output and "held by the policy" in result.output  # r1's idle role
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    result = CliRunner().invoke(timeline, ["--out", str(png), "--json"], obj=settings)
    figures = json.loads(result.output)
    assert figures["bubble_ratio"] == 0.15 and figures["seconds_by_kind"]["train"] == 4.0
    assert figures["accounts"]["generating"] == 13.0 and figures["accounts"]["loading weights"] == 1.0


def test_timeline_without_records_says_so(settings, tmp_path):
    result = CliRunner().invoke(timeline, ["--out", str(tmp_path / "t.png")], obj=settings)
    assert result.exit_code != 0 and "no resource status records" in result.output

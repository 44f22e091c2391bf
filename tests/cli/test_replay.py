"""`seamlessflow replay` through CliRunner against the real broker."""

import dataclasses
import json
import time

from click.testing import CliRunner

from seamlessflow.cli.replay import parse_time, replay
from seamlessflow.kafka.io import read_topic
from seamlessflow.replay import read_archive
from seamlessflow.testing.replay_samples import expected_two_turn, forked_session, produce, two_turn_session
from seamlessflow.topics import Topics

# Record times an hour ago and later, not in 1970: records older than the topics' retention (7 days) are deleted
# by the broker's next retention check (every 5 minutes), and one once fell between a test's writes and reads.
EARLY_MS = int(time.time() * 1000) - 3_600_000
LATE_MS, BETWEEN = EARLY_MS + 1_000_000, str(EARLY_MS + 500_000)


def invoke(settings, *args):
    return CliRunner().invoke(replay, list(args), obj=settings, catch_exceptions=False)


def publish_good_run(settings, codec):
    names = Topics(settings)
    produce(settings, codec, names.session_events, two_turn_session("s1") + forked_session("f1"), EARLY_MS)
    produce(settings, codec, names.session_events, two_turn_session("s2", team="blue"), LATE_MS)
    produce(settings, codec, names.trajectories, [expected_two_turn("s1"), expected_two_turn("s2", team="blue")])


def test_render_shows_turns_with_token_boundaries(settings, codec):
    publish_good_run(settings, codec)
    out = invoke(settings, "--session", "s1").stdout
    assert "session s1" in out and "team red" in out and "extension" in out
    assert "⟨v2⟩" in out and "(-0.50)" in out and "[4 known]" in out
    assert "f1" not in out


def test_jsonl_filters_by_session_team_and_time(settings, codec):
    publish_good_run(settings, codec)

    def lines(*args):
        return [json.loads(line) for line in invoke(settings, "--format", "jsonl", *args).stdout.splitlines()]

    assert [d["session_id"] for d in lines("--session", "f1")] == ["f1"]
    assert [d["session_id"] for d in lines("--team", "blue")] == ["s2"]
    assert [d["session_id"] for d in lines("--since", BETWEEN)] == ["s2"]
    assert sorted(d["session_id"] for d in lines("--until", BETWEEN)) == ["f1", "s1"]
    (fork,) = lines("--session", "f1")
    assert [t["outcome"] for t in fork["turns"]] == ["start", "fork"]
    trajectories = lines("trajectories", "--min-reward", "0.5", "--team", "red")
    assert [d["event_id"] for d in trajectories] == ["s1/0"]


def test_check_passes_then_catches_a_corrupted_record(settings, codec):
    names = Topics(settings)
    produce(settings, codec, names.session_events, two_turn_session("s1"))
    produce(settings, codec, names.trajectories, [expected_two_turn("s1")])
    ok = invoke(settings, "--check", "--format", "jsonl")
    assert ok.exit_code == 0 and json.loads(ok.stdout.splitlines()[-1])["trajectories_verified"] == 1
    corrupted = dataclasses.replace(expected_two_turn("s1"), tokens=[1, 2, 3, 9, 5, 6])
    produce(settings, codec, names.trajectories, [corrupted])
    bad = invoke(settings, "--check", "--format", "jsonl")
    assert bad.exit_code == 1
    mismatch = json.loads(bad.stdout.splitlines()[0])
    assert mismatch["kind"] == "differs" and mismatch["detail"].startswith("tokens[3]: stored 9")


def test_archive_round_trip_and_republish(settings, codec, tmp_path):
    publish_good_run(settings, codec)
    names = Topics(settings)
    archive = tmp_path / "run1"
    assert invoke(settings, "session-events", "trajectories", "--archive", str(archive)).exit_code == 0
    original = {t: [(r.key, r.value, r.timestamp_ms) for r in read_topic(settings, getattr(names, t), codec)]
                for t in ("session_events", "trajectories")}
    from_archive = {t: [(r.key, r.value, r.timestamp_ms) for r in
                        read_archive(archive / f"{getattr(names, t)}.avro", codec)]
                    for t in ("session_events", "trajectories")}
    assert {t: sorted(v) for t, v in from_archive.items()} == {t: sorted(v) for t, v in original.items()}
    checked = invoke(settings, "--from-archive", str(archive), "--check", "--format", "jsonl")
    assert checked.exit_code == 1  # f1's two trajectories were never stored in this run
    assert {json.loads(line).get("trajectory_id") for line in checked.stdout.splitlines()[:-1]} == {"f1/0", "f1/1"}
    checked = invoke(settings, "--from-archive", str(archive), "--check", "--session", "s1", "--session", "s2")
    assert checked.exit_code == 0 and "2 trajectory record(s) identical" in checked.stdout
    scratch = f"{settings.topic_prefix}.scratch"
    result = invoke(settings, "--from-archive", str(archive), "--team", "blue", "--to", scratch)
    assert result.exit_code == 0
    copied = [r.message for r in read_topic(settings, scratch, codec)]
    assert [type(m).__name__ for m in copied] == ["TokenIO", "TokenIO", "EpisodeEnd"]
    assert {m.session_id for m in copied} == {"s2"}


def test_parse_time_forms():
    assert parse_time("1732190000000") == 1732190000000
    assert parse_time("15m", now_ms=1_000_000_000) == 1_000_000_000 - 900_000
    assert parse_time("2026-11-21T00:00:00+00:00") == 1795219200000

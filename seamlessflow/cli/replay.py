"""`seamlessflow replay`: look at what agents and the engines exchanged, token by token, and verify it.

    seamlessflow replay                                   # every session, rendered
    seamlessflow replay --session 3f2a… --format jsonl    # one session as JSON lines
    seamlessflow replay trajectories --team red --min-reward 0.5 --since 30m
    seamlessflow replay --check                           # re-assemble and compare bit-for-bit
    seamlessflow replay trajectories --status done --to scratch.trajectories
    seamlessflow replay session-events trajectories --archive runs/r1
    seamlessflow replay --from-archive runs/r1 --check
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from seamlessflow.assembler import AssemblerOptions
from seamlessflow.avro import Codec
from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import DeliveryFailed, MessageProducer, Record
from seamlessflow.messages import EpisodeEnd, TokenIO
from seamlessflow.replay import (
    CheckReport,
    Filter,
    SessionEvents,
    archive_file,
    check,
    read_archive,
    read_from,
    select_sessions,
    select_trajectories,
    session_json,
    trajectory_json,
    write_archive,
)
from seamlessflow.replay.render import Decode, print_all
from seamlessflow.topics import Topics

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_time(value: str | None, now_ms: int | None = None) -> int | None:
    """Epoch milliseconds from `1732190000000`, `2026-11-21T14:05:00` (local unless it has a zone), or `15m` ago."""
    if value is None:
        return None
    now_ms = now_ms if now_ms is not None else int(time.time() * 1000)
    if value.isdigit():
        return int(value)
    relative = _RELATIVE.match(value)
    if relative:
        return now_ms - int(float(relative.group(1)) * _UNIT_S[relative.group(2)] * 1000)
    try:
        return int(datetime.fromisoformat(value).timestamp() * 1000)
    except ValueError:
        raise click.BadParameter(f"{value!r}: use epoch ms, ISO-8601, or a duration ago like 15m / 2h / 1d") from None


def parse_offsets(values: tuple[str, ...]) -> dict[int, int] | None:
    """`--offset 5` (all partitions) or `--offset 2:17` (partition 2), repeatable."""
    if not values:
        return None
    out: dict[int, int] = {}
    for value in values:
        part, _, offset = value.rpartition(":")
        if not offset.isdigit() or (part and not part.isdigit()):
            raise click.BadParameter(f"{value!r}: use OFFSET or PARTITION:OFFSET")
        if part:
            out[int(part)] = int(offset)
        else:
            out.update({p: int(offset) for p in range(1024)})
    return out


@click.command()
@click.argument("topics", nargs=-1)
@click.option("--offset", "offsets", multiple=True, help="Start at OFFSET (all partitions) or PARTITION:OFFSET.")
@click.option("--since", help="Start at this time: epoch ms, ISO-8601, or ago (15m, 2h, 1d). Verified, not trusted.")
@click.option("--until", help="Stop before this time (same forms as --since).")
@click.option("--session", "sessions", multiple=True, help="Only this session (repeatable).")
@click.option("--team", help="Only this team.")
@click.option("--run", "run_name", help="Only this run.")
@click.option("--min-reward", type=float, help="Sessions/trajectories with reward >= this.")
@click.option("--max-reward", type=float, help="Sessions/trajectories with reward <= this.")
@click.option("--status", "statuses", multiple=True, help="done | failed | aborted | truncated | open (repeatable).")
@click.option("--format", "fmt", type=click.Choice(["rich", "jsonl"]), default="rich", show_default=True)
@click.option("--check", "do_check", is_flag=True, help="Re-assemble session events; compare with stored trajectories.")
@click.option("--to", "to_topic", help="Re-publish the selected records to this topic (full name).")
@click.option(
    "--archive", "archive_dir", type=click.Path(file_okay=False), help="Write selected records to DIR/<topic>.avro."
)
@click.option(
    "--from-archive", type=click.Path(file_okay=False, exists=True), help="Read from DIR instead of the broker."
)
@click.option("--tokenizer", type=click.Path(exists=True), help="tokenizer.json (or its dir) to show text, not ids.")
@click.option("--limit", type=int, default=0, help="Render at most this many sessions/trajectories (0: all).")
@pass_settings
def replay(
    settings: Settings,
    topics: tuple[str, ...],
    offsets: tuple[str, ...],
    since: str | None,
    until: str | None,
    sessions: tuple[str, ...],
    team: str | None,
    run_name: str | None,
    min_reward: float | None,
    max_reward: float | None,
    statuses: tuple[str, ...],
    fmt: str,
    do_check: bool,
    to_topic: str | None,
    archive_dir: str | None,
    from_archive: str | None,
    tokenizer: str | None,
    limit: int,
) -> None:
    """Read TOPICS (default: session-events) from the beginning, an offset or a time, filter, and show,
    check (--check), re-publish (--to) or archive (--archive) what was selected."""
    codec = codec_for(settings)
    where = Filter(frozenset(sessions), team, run_name, min_reward, max_reward, frozenset(statuses),
                   parse_time(since), parse_time(until))
    names = Topics(settings)
    wanted = list(topics or ("session-events",))
    if do_check:
        wanted += [t for t in ("session-events", "trajectories") if t not in wanted]
    notes: list[str] = []
    loaded = {name: _load(settings, names, name, codec, offsets, where, from_archive, notes) for name in wanted}
    for note in notes:
        click.echo(note, err=True)
    records = [r for rs in loaded.values() for r in rs]
    chosen_sessions = select_sessions((r for r in records if isinstance(r.message, (TokenIO, EpisodeEnd))), where)
    chosen_trajectories = select_trajectories(records, where)
    console = Console()
    acted = False
    if do_check:
        report = check(chosen_sessions, records, AssemblerOptions.from_settings(settings), codec)
        _print_report(report, fmt, console)
        acted = True
    if to_topic:
        count = _republish(settings, codec, to_topic, chosen_sessions, chosen_trajectories)
        click.echo(f"re-published {count} record(s) to {to_topic}", err=True)
        acted = True
    if archive_dir:
        for name, topic_records in loaded.items():
            kept = _kept(topic_records, chosen_sessions, chosen_trajectories, where)
            path = write_archive(Path(archive_dir), _full(names, name), kept)
            click.echo(f"archived {len(kept)} record(s) to {path}", err=True)
        acted = True
    if not acted:
        _show(console, fmt, chosen_sessions, chosen_trajectories, limit, _decoder(tokenizer))
    if do_check and not report.ok:
        raise SystemExit(1)


def _full(names: Topics, name: str) -> str:
    return names.specs[name].full_name if name in names.specs else name


def _load(settings: Settings, names: Topics, name: str, codec: Codec, offsets: tuple[str, ...], where: Filter,
          from_archive: str | None, notes: list[str]) -> list[Record]:
    full = _full(names, name)
    if from_archive:
        short = name if name in names.specs else None
        return list(read_archive(archive_file(Path(from_archive), full, short), codec))
    return list(read_from(settings, full, codec, parse_offsets(offsets), where.since_ms, notes))


def _kept(records: list[Record], sessions: list[SessionEvents], trajectories: list[Record],
          where: Filter) -> list[Record]:
    """This topic's selected records, in topic order; undecodable ones too when nothing is filtered."""
    chosen = {id(r) for s in sessions for r in s.records} | {id(r) for r in trajectories}
    return [r for r in records if id(r) in chosen or (r.message is None and where.is_empty)]


def _republish(settings: Settings, codec: Codec, topic: str, sessions: list[SessionEvents],
               trajectories: list[Record]) -> int:
    producer = MessageProducer(settings, codec)
    errors: list = []
    records = sorted((r for s in sessions for r in s.records), key=lambda r: (r.partition, r.offset)) + trajectories
    for record in records:  # the bytes as they were, not re-encoded
        producer.send_bytes(
            topic, record.key, record.value, on_delivery=lambda err, _m: errors.append(err) if err else None
        )
    try:
        producer.flush(60)
    except DeliveryFailed as exc:
        errors.append(exc)
    if errors:
        raise click.ClickException(f"re-publishing to {topic}: {errors[0]}")
    return len(records)


def _show(console: Console, fmt: str, sessions: list[SessionEvents], trajectories: list[Record], limit: int,
          decode: Decode | None) -> None:
    if limit:
        sessions, trajectories = sessions[:limit], trajectories[:max(0, limit - len(sessions))]
    if fmt == "jsonl":
        for session in sessions:
            click.echo(json.dumps(session_json(session)))
        for trajectory in trajectories:
            click.echo(json.dumps(trajectory_json(trajectory.message)))
        return
    print_all(console, sessions, [t.message for t in trajectories], decode)
    if not sessions and not trajectories:
        console.print("[dim]nothing selected[/dim]")


def _print_report(report: CheckReport, fmt: str, console: Console) -> None:
    summary = {"type": "check", "ok": report.ok, "sessions_checked": report.sessions_checked,
               "trajectories_verified": report.trajectories_verified, "skipped": report.skipped,
               "mismatches": len(report.mismatches)}
    if fmt == "jsonl":
        for m in report.mismatches:
            click.echo(json.dumps({"type": "mismatch", **m.__dict__}))
        click.echo(json.dumps(summary))
        return
    if report.mismatches:
        table = Table("trajectory", "kind", "stored at", "detail", title="check: mismatches", show_lines=True)
        for m in report.mismatches:
            table.add_row(m.trajectory_id, m.kind, m.where, m.detail)
        console.print(table)
    verdict = "[green]OK[/green]" if report.ok else f"[red]{len(report.mismatches)} mismatch(es)[/red]"
    console.print(f"check {verdict}: {report.sessions_checked} session(s), {report.trajectories_verified} "
                  f"trajectory record(s) identical" + (f", skipped {report.skipped}" if report.skipped else ""))


def _decoder(path: str | None) -> Decode | None:
    if not path:
        return None
    from tokenizers import Tokenizer

    file = Path(path) / "tokenizer.json" if Path(path).is_dir() else Path(path)
    tokenizer = Tokenizer.from_file(str(file))
    return lambda ids: tokenizer.decode(list(ids), skip_special_tokens=False)

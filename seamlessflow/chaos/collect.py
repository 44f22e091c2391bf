"""Reads what the audit judges from outside every service: topics, the trainer's step log, the driver's ledger."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

from seamlessflow.assembler import AssemblerOptions
from seamlessflow.chaos.adapters import TeamAdapters
from seamlessflow.chaos.audit import AckedCall, AuditReport, Ledger, Rules, Zombie, audit
from seamlessflow.chaos.stored import acked_response
from seamlessflow.config import Settings
from seamlessflow.core.assembler import Selection
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import read_topic
from seamlessflow.kafka.reader import Record
from seamlessflow.messages import EpisodeEnd, Trajectory
from seamlessflow.model.lora import team_adapters
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions


def rules_for(settings: Settings) -> Rules:
    options = AssemblerOptions.from_settings(settings)
    return Rules(options.max_tokens_per_session, options.selection is Selection.LONGEST, options.keep_aborted)


def step_log(settings: Settings, trainer: TrainerOptions | None = None) -> list[dict] | None:
    """The trainer's durable step log (`steps.jsonl`), or None when this data dir has none."""
    path = (trainer or TrainerOptions.from_settings(settings)).work_dir(settings) / "steps.jsonl"
    if not path.exists():
        return None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def adapter_logs(settings: Settings) -> TeamAdapters | None:
    """In a stack that trains teams' adapters: each team's adapter, and its trainer's step log ([] before its
    first durable step); None in a stack that trains the base."""
    options = TrainerOptions.from_settings(settings)
    if options.target != "adapters":
        return None
    names = {team: adapter.name for team, adapter in team_adapters(settings).items()}
    trainers = {team: options.for_adapter(team) for team in names}
    return TeamAdapters(names, {team: step_log(settings, t) or [] for team, t in trainers.items()},
                        {team: t.resource_id for team, t in trainers.items()})


def read_ledger(path: Path) -> Ledger:
    """The driver's JSON lines: {"session", "prompt", "completions"} per acknowledged call, {"end": session id}
    per acknowledged end, {"stored": response id, ...} per acknowledged stored response; and the run's own
    {"zombie": {...}} per process frozen and replaced (`zombie_line`)."""
    calls, ends, zombies, responses = [], [], [], []
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            if "prompt" in entry:
                calls.append(
                    AckedCall(entry["session"], tuple(entry["prompt"]), tuple(map(tuple, entry["completions"])))
                )
            elif "end" in entry:
                ends.append(entry["end"])
            elif "stored" in entry:
                responses.append(acked_response(entry))
            elif "zombie" in entry:
                zombies.append(_zombie(entry["zombie"]))
    return Ledger(tuple(calls), tuple(ends), tuple(zombies), tuple(responses))


def zombie_line(zombie: Zombie) -> str:
    return json.dumps({"zombie": dataclasses.asdict(zombie)}) + "\n"


def _zombie(fields: dict) -> Zombie:
    """JSON keys are strings: the offsets' partitions become ints again."""
    offsets = {name: {int(p): o for p, o in fields[name].items()} for name in ("offsets_at_resume", "offsets_after")}
    return Zombie(**{**fields, **offsets, "writers": tuple(fields["writers"])})


def audit_topics(settings: Settings, ledger: Ledger | None = None, timeout_s: float = 120.0) -> AuditReport:
    topics = Topics(settings)
    codec = codec_for(settings)

    def read(topic: str) -> list:
        return list(read_topic(settings, topic, codec, timeout_s=timeout_s))

    # first: whatever they trained was on the topic, written before the cut below
    steps, adapters = step_log(settings), adapter_logs(settings)
    cut_ms = int(time.time() * 1000)  # the session events are read up to their end as of now
    events = read(topics.session_events)
    trajectories = before_the_cut(read(topics.trajectories), events, cut_ms)
    roles = [r for topic in (topics.control, topics.tasks, topics.status) for r in read(topic)] if (
        ledger is not None and ledger.zombies) else []  # only the zombie rule reads them
    served = {team: adapter.name for team, adapter in team_adapters(settings).items()}  # any stack may serve them
    return audit(events, trajectories, read(topics.dead_letter), read(topics.weights), steps, ledger,
                 rules_for(settings), roles, adapters, served)


def before_the_cut(trajectories: Sequence[Record], events: Sequence[Record], cut_ms: int) -> list[Record]:
    """A live stack (its own agents still running) ends sessions while the audit reads: a trajectory written
    after the session events were read (`cut_ms`, by the record's time; one clock for the stack), of a session
    whose end they do not hold, is left to the next audit. Every other trajectory is judged: one written before
    the cut has its end among the events, which the assembler read before writing it."""
    ended = {r.message.session_id for r in events if isinstance(r.message, EpisodeEnd)}
    return [r for r in trajectories
            if not isinstance(r.message, Trajectory) or r.timestamp_ms < cut_ms or r.message.session_id in ended]

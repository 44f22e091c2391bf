"""Reads what the audit judges from outside every service: topics, the trainer's step log, the driver's ledger."""

from __future__ import annotations

import json
from pathlib import Path

from seamlessflow.assembler import AssemblerOptions
from seamlessflow.chaos.audit import AckedCall, AuditReport, Ledger, Rules, audit
from seamlessflow.config import Settings
from seamlessflow.core.assembler import Selection
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.kafka.io import read_topic
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions


def rules_for(settings: Settings) -> Rules:
    config = AssemblerOptions.from_settings(settings)
    return Rules(config.max_tokens_per_session, config.selection is Selection.LONGEST, config.keep_aborted)


def step_log(settings: Settings) -> list[dict] | None:
    """The trainer's durable step log (`steps.jsonl`), or None when this data dir has none."""
    path = TrainerOptions.from_settings(settings).work_dir(settings) / "steps.jsonl"
    if not path.exists():
        return None
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def read_ledger(path: Path) -> Ledger:
    """The driver's JSON lines: {"session", "prompt", "completions"} per acknowledged call, {"end": session id}
    per acknowledged end."""
    calls, ends = [], []
    for line in path.read_text().splitlines():
        if line.strip():
            entry = json.loads(line)
            if "prompt" in entry:
                calls.append(
                    AckedCall(entry["session"], tuple(entry["prompt"]), tuple(map(tuple, entry["completions"])))
                )
            elif "end" in entry:
                ends.append(entry["end"])
    return Ledger(tuple(calls), tuple(ends))


def audit_topics(settings: Settings, ledger: Ledger | None = None, timeout_s: float = 120.0) -> AuditReport:
    topics = Topics(settings)
    codec = codec_for(settings)

    def read(topic: str) -> list:
        return list(read_topic(settings, topic, codec, timeout_s=timeout_s))

    return audit(read(topics.session_events), read(topics.trajectories), read(topics.dead_letter),
                 read(topics.weights), step_log(settings), ledger, rules_for(settings))

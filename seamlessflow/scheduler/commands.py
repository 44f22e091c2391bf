"""Core commands to `ControlCommand` records (and back, for rebuilding from the control topic)."""

from __future__ import annotations

from typing import Any

from seamlessflow.core.policies import Command, LoadWeights, Pause, SetActive
from seamlessflow.messages import ControlCommand, new_id, now_ms


def to_message(command: Command, epoch: int, team: str, run: str, weights: dict[int, str],
               generation: str | None = None) -> ControlCommand:
    """`weights` maps version -> uri so a `load_weights` names where the trainer saved that version;
    `generation`: the stack start this scheduler belongs to, which resources restore only within."""
    detail: dict[str, Any] = {}
    if isinstance(command, SetActive):
        detail = {"role": command.role}
    elif isinstance(command, Pause):
        detail = {"mode": command.mode}
    elif isinstance(command, LoadWeights):
        detail = {"weight_version": command.version, "weight_uri": weights.get(command.version)}
    return ControlCommand(new_id(), command.resource_id, epoch, command.kind, team, run, now_ms(), **detail,
                          generation=generation)


def describe(message: ControlCommand) -> str:
    detail = (
        message.role or message.mode or (f"v{message.weight_version}" if message.weight_version is not None else "")
    )
    return f"{message.resource_id}#{message.epoch} {message.command} {detail}".rstrip()

"""`up` on a data directory whose stack lost its supervisor: killed with -9 (the OOM killer, a lost session), it
left every service running, and `up` used to judge "running" by the supervisor's pid alone and start a second
full set beside the first. Now `up` never starts a second stack: it adopts the first, or stops it first.

Why adoption by default: the services are healthy and nothing of the stack needs them restarted; adopting keeps
the engines warm (a vLLM start is minutes on a loaded machine), the trainer on its step and the proxy's sessions
open. The new supervisor takes over the recorded processes that still run (`processes.Adopted`: found by pid,
checked by the stack's marker and start time), watches them by pid and restarts one that dies from its spec, as
it does its own; the stack keeps its generation, so a restarted service restores the commands it was sent.

Why stop-first when adopting is not certainly right: the running services were started from the recorded
config and generation, so adopting them under another config (this `up`'s options differ), a stack that was
being stopped, or processes that no recorded service holds would leave a stack that is not what `up` was asked
for. Those are stopped (SIGTERM, SIGKILL after the grace, every process carrying the stack's marker) and the
stack started again: training resumes from its checkpoint and committed offsets.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import yaml

from seamlessflow.config import Settings
from seamlessflow.stack.paths import config_path, run_dir
from seamlessflow.stack.placement_protocol import Recorded
from seamlessflow.stack.processes import stack_processes


def take_over(stack: Recorded, settings: Settings, say: Callable[[str], object]) -> tuple[Settings, dict[str, dict]]:
    """What a new `up` does with a stack whose supervisor is gone, said in one line: the settings to start with
    (the orphans' generation when they are adopted) and the recorded services the new supervisor adopts
    ({} when there was nothing to take over, or it was stopped first)."""
    alive = stack.without_holder()
    if not alive and not stack_processes(run_dir(settings)):
        return settings, {}
    found = (f"a stack without its supervisor (pid {stack.state.get('supervisor_pid')} gone; "
             f"{len(alive)} services alive)")
    reason = _why_not_adopt(stack.state, settings, alive)
    if reason:
        stack.stop(lambda _: None)
        say(f"{found} was stopped first: {reason}")
        return settings, {}
    say(f"{found} was adopted")
    services = stack.state.get("services") or {}
    return settings.with_overrides(generation=_generation(stack.state)), {name: services[name] for name in alive}


def _why_not_adopt(state: dict[str, Any], settings: Settings, alive: dict[str, int]) -> str:
    """"" when the orphans are the stack this `up` would start; else why not, in words."""
    if not alive:
        return "only processes that no service holds were left"
    if state.get("stopping"):
        return "it was being stopped"
    if not _generation(state):
        return "it had not started its broker yet"
    if _comparable(_recorded_config(settings)) != _comparable(json.loads(settings.model_dump_json())):
        return "it runs another configuration than this start's"
    return ""


def _generation(state: dict[str, Any]) -> str:
    return str((state.get("info") or {}).get("generation") or "")


def _recorded_config(settings: Settings) -> dict[str, Any]:
    """The effective config the stack's services were started with (`start_stack` writes it)."""
    try:
        return yaml.safe_load(config_path(settings).read_text()) or {}
    except (OSError, yaml.YAMLError):
        return {}


def _comparable(config: dict[str, Any]) -> dict[str, Any]:
    """A config as it matters to the services: every start draws its own generation."""
    return {key: value for key, value in config.items() if key != "generation"}

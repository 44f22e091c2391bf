"""An agent worker from what a person types: `MODULE:FUNCTION`, team, pool, options; shared by
`seamlessflow agent run` and `python -m services.agents`, so the two cannot drift apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from seamlessflow.agents.options import AgentOptions
from seamlessflow.agents.worker import AgentWorker
from seamlessflow.config import Settings
from seamlessflow.kafka.codecs import codec_for
from seamlessflow.user_code import load_function


class NoTeamKey(LookupError):
    """No key given and none stored for the team."""


def team_key(settings: Settings, team: str, key: str | None) -> str:
    """The key given, else the one `seamlessflow team add` stored in `<data-dir>/<team>.key`, else the team's
    in `team_keys` (how a key reaches a pool on another host, whose data dir is its own)."""
    if key:
        return key
    key_file = Path(settings.data_dir) / f"{team}.key"
    if key_file.exists():
        return key_file.read_text().strip()
    if team in settings.team_keys:
        return settings.team_keys[team]
    raise NoTeamKey(f"no --key given, no {key_file} and no team_keys entry for {team}; issue one with "
                    f"`seamlessflow team add {team}`")


def agent_worker(settings: Settings, reference: str, team: str | None, key: str | None,
                 **options: Any) -> AgentWorker:
    """`options`: AgentOptions fields over the `agents` section (None: the section's value)."""
    team = team or settings.team
    opts = AgentOptions.from_settings(settings, **options)
    return AgentWorker(
        settings, codec_for(settings), load_function(reference), team, team_key(settings, team, key), opts
    )

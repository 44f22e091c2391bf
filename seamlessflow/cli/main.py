"""`seamlessflow`: run, inspect and debug a SeamlessFlow stack."""

from __future__ import annotations

from typing import Any

import click

from seamlessflow.cli.agent import agent
from seamlessflow.cli.chaos import chaos
from seamlessflow.cli.context import global_options, load_settings
from seamlessflow.cli.dashboard import dashboard
from seamlessflow.cli.evals import evals
from seamlessflow.cli.init import init
from seamlessflow.cli.model import model_group
from seamlessflow.cli.replay import replay
from seamlessflow.cli.reward import reward
from seamlessflow.cli.simulate import simulate
from seamlessflow.cli.stack import down, scale, status, up
from seamlessflow.cli.tasks import tasks
from seamlessflow.cli.team import team
from seamlessflow.cli.timeline import timeline
from seamlessflow.cli.topics import tail, topics


@click.group(context_settings={"auto_envvar_prefix": "SEAMLESSFLOW", "help_option_names": ["-h", "--help"]})
@global_options
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, **overrides: Any) -> None:
    """SeamlessFlow: server-based RL for LLM agents over Kafka."""
    ctx.obj = load_settings(config_path, **overrides)


for command in (up, down, status, topics, tail, model_group, team, agent, reward, replay, timeline, evals, simulate,
                dashboard, chaos, scale, init, tasks):
    cli.add_command(command)


if __name__ == "__main__":
    cli()

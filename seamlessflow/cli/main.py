"""`seamlessflow`: run, inspect and debug a SeamlessFlow stack."""

from __future__ import annotations

import importlib
from typing import Any

import click

from seamlessflow.cli.context import global_options, load_settings

# Each command's module, imported only when that command runs (click's lazy-loading group): importing every
# command at start made each call (`status --json`, `down`, a test's `scale`) import the agents' OpenAI SDK,
# the simulator and the replay tools, 2 CPU-s a call where `status` needs under one.
COMMANDS = {
    "up": "seamlessflow.cli.stack:up", "down": "seamlessflow.cli.stack:down",
    "status": "seamlessflow.cli.stack:status", "scale": "seamlessflow.cli.stack:scale",
    "topics": "seamlessflow.cli.topics:topics", "tail": "seamlessflow.cli.topics:tail",
    "model": "seamlessflow.cli.model:model_group", "team": "seamlessflow.cli.team:team",
    "agent": "seamlessflow.cli.agent:agent", "reward": "seamlessflow.cli.reward:reward",
    "teacher": "seamlessflow.cli.teacher:teacher",
    "replay": "seamlessflow.cli.replay:replay", "timeline": "seamlessflow.cli.timeline:timeline",
    "evals": "seamlessflow.cli.evals:evals", "simulate": "seamlessflow.cli.simulate:simulate",
    "dashboard": "seamlessflow.cli.dashboard:dashboard", "chaos": "seamlessflow.cli.chaos:chaos",
    "init": "seamlessflow.cli.init:init", "tasks": "seamlessflow.cli.tasks:tasks",
}


class LazyGroup(click.Group):
    """A group whose subcommands are imported by name, when used (`--help` imports them all, for their help)."""

    def __init__(self, *args: Any, lazy: dict[str, str], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lazy = lazy

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.lazy:
            return super().get_command(ctx, cmd_name)
        module, name = self.lazy[cmd_name].split(":")
        command = getattr(importlib.import_module(module), name)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise RuntimeError(f"{self.lazy[cmd_name]} is not the `{cmd_name}` command")
        return command


@click.group(cls=LazyGroup, lazy=COMMANDS,
             context_settings={"auto_envvar_prefix": "SEAMLESSFLOW", "help_option_names": ["-h", "--help"]})
@global_options
@click.pass_context
def cli(ctx: click.Context, config_path: str | None, **overrides: Any) -> None:
    """SeamlessFlow: server-based RL for LLM agents over Kafka."""
    ctx.obj = load_settings(config_path, **overrides)


if __name__ == "__main__":
    cli()

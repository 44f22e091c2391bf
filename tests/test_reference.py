"""The generated references: every configuration key and every command is on its page."""

from __future__ import annotations

import click

from seamlessflow.cli.main import cli
from seamlessflow.config import Settings
from seamlessflow.reference import cli_markdown, configuration_markdown, keys
from seamlessflow.sections import LIST_SECTIONS, SECTIONS


def command_paths(command: click.Command, path: str) -> list[str]:
    """Every command's path, found as click finds them (the top-level group loads its commands by name)."""
    paths = [path]
    if isinstance(command, click.Group):
        ctx = click.Context(command, info_name=path)
        for name in command.list_commands(ctx):
            sub = command.get_command(ctx, name)
            if sub is not None and not sub.hidden:
                paths += command_paths(sub, f"{path} {name}")
    return paths


def test_the_configuration_reference_lists_every_key_with_its_help():
    page = configuration_markdown()
    rows = [*keys(Settings)]
    for section, model in SECTIONS.items():
        rows += keys(model, f"{section}[]." if section in LIST_SECTIONS else f"{section}.")
    for row in rows:
        assert f"| `{row.name}` | `{row.type}` |" in page
    assert "| `rollout.workers.<id>.cpus` | `str | null` | `null` |" in page
    assert "| `agent_pools[].function` | `str` | *required* |" in page


def test_a_default_inside_the_checkout_is_shown_relative_to_it():
    page = configuration_markdown()
    assert '| `trainer.deepspeed` | `str | dict[str, any]` | `"infra/deepspeed/cpu_zero1.json"` |' in page


def test_the_cli_reference_names_every_command_with_its_options():
    page = cli_markdown(cli, "seamlessflow")
    paths = command_paths(cli, "seamlessflow")
    assert len(paths) > 10
    for path in paths:
        assert f"\n## `{path}`\n" in page
        assert f"Usage: {path} " in page
    assert "| `--data-dir DIRECTORY` | Data directory (default ./.seamlessflow). (env: `SEAMLESSFLOW_DATA_DIR`) |" \
        in page


def test_a_help_in_a_table_cell_stays_in_its_cell():
    @click.command()
    @click.option("--mode", type=click.Choice(["a", "b"]), help="a | b, for <id>")
    def tool(mode):
        """Does `x | y`."""

    page = cli_markdown(tool, "tool")
    assert r"| `--mode [a|b]` | a \| b, for &lt;id&gt; (env: " not in page  # no auto env var outside a group
    assert r"| `--mode [a|b]` | a \| b, for &lt;id&gt; |" in page
    assert "Does `x | y`." in page

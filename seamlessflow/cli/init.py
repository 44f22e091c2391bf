"""`seamlessflow init DIR --harness H`: an agent, its tasks and its reward, ready to train on the running stack."""

from __future__ import annotations

from pathlib import Path

import click

from seamlessflow.scaffold import HARNESSES, DirectoryNotEmpty, scaffold


@click.command()
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False, path_type=Path))
@click.option("--harness", required=True, type=click.Choice(list(HARNESSES)),
              help="What the agent is written with (codex and claude-code: the npm CLIs, run as they are).")
@click.option("--force", is_flag=True, help="Write into a DIR that is not empty (overwrites the scaffold's files).")
def init(directory: Path, harness: str, force: bool) -> None:
    """Write DIR/agent.py, tasks.jsonl, reward.py and README.md, and print the command that trains the agent."""
    try:
        made = scaffold(directory, harness, force=force)
    except DirectoryNotEmpty as exc:
        raise click.UsageError(str(exc)) from exc
    click.echo(f"wrote {', '.join(p.name for p in made.files)} in {made.directory} ({harness}); "
               f"with the stack running (make up), train it from here with:", err=True)
    click.echo(made.command)

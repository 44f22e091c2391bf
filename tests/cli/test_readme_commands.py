"""Every command line the README and the documentation pages (docs/**/*.md) show parses with today's CLI, so
the documentation and the CLI cannot drift apart again (the README once showed `up --brokers 3` while `up` had
no such option)."""

import json
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from seamlessflow.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def _code_lines(text: str) -> list[str]:
    """Lines of fenced code blocks that run `seamlessflow`, with `\\` continuations joined."""
    lines, fenced, pending = [], False, ""
    for raw in text.splitlines():
        if raw.startswith("```"):
            fenced = not fenced
            continue
        line = pending + raw.strip().removeprefix("$ ")
        pending = line[:-1] + " " if fenced and line.endswith("\\") else ""
        if fenced and not pending and line.startswith("seamlessflow "):
            lines.append(line)
    return lines


def readme_commands() -> list[str]:
    shown: set[str] = set()
    for page in PAGES:
        text = page.read_text()
        shown.update(_code_lines(text), re.findall(r"`(seamlessflow [^`]+)`", text))
    return sorted(shown)


def argv_of(line: str) -> list[str]:
    """The arguments of a shown command: its description column, comments and pipes cut off; the usage
    syntax (`[--opt]`, `a|b`, `...`) read as its first form."""
    line = re.split(r"\s{2,}|\s#\s|\s\|\s", line)[0]
    line = line.replace("[", " ").replace("]", " ").replace("…", "")
    words = [word.split("|")[0] for word in shlex.split(line)[1:] if word not in ("...", "\\")]
    return [word for word in words if word]


def test_the_readme_shows_commands():
    assert len(PAGES) > 10 and len(readme_commands()) > 20


@pytest.mark.parametrize("line", readme_commands())
def test_every_readme_command_parses(line, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    argv = argv_of(line)
    for flag, value in zip(argv, argv[1:], strict=False):
        if flag == "--config":  # the config file a shown command reads: an empty one for the parse
            (tmp_path / value).write_text("")
    result = CliRunner().invoke(cli, [*argv, "--help"])
    assert result.exit_code == 0 and "Usage:" in result.output, f"{line!r}: {result.output}"


@pytest.mark.parametrize("args", [["down"], ["status", "--json"]])
def test_the_cheap_readme_commands_run_for_real(args, tmp_path):
    shown = [argv_of(line) for line in readme_commands()]
    assert any(argv[: len(args)] == args for argv in shown), f"neither the README nor the docs show {args}"
    result = CliRunner().invoke(cli, ["--data-dir", str(tmp_path), "--broker-port", "1", *args])
    assert result.exit_code == 0, result.output
    if args[0] == "status":
        assert json.loads(result.output)["running"] is False

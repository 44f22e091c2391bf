"""Writes a scaffold: `agent.py` for the chosen harness, `tasks.jsonl`, `reward.py` and a README naming the
command that trains it.

Why a table of harnesses: the six differ only in which agent template they take and which task family fits
them (a function-tool loop answers sums; a coding CLI writes a file), so adding a harness is one row and
one template. The task kind and the pool are the directory's name, so the scaffold's tasks reach its own
agent pool and no other on the shared tasks topic.
"""

from __future__ import annotations

import re
import shlex
import string
from dataclasses import dataclass
from importlib import resources
from pathlib import Path


@dataclass(frozen=True)
class Harness:
    """`agent`: the template under templates/agents/; `family`: the task file and reward (templates/<family>/)."""

    name: str
    agent: str
    family: str
    summary: str


HARNESSES: dict[str, Harness] = {h.name: h for h in (
    Harness("openai", "openai.py.tmpl", "tool", "the `openai` SDK: a chat-completions loop with a function tool"),
    Harness("openai-agents", "openai_agents.py.tmpl", "tool", "the OpenAI Agents SDK: an `Agent` with a function tool"),
    Harness("langgraph", "langgraph.py.tmpl", "tool", "LangGraph: a ReAct agent with a function tool"),
    Harness("anthropic", "anthropic.py.tmpl", "tool",
            "the `anthropic` SDK: a Messages `tool_use` loop against the proxy's Messages front door"),
    Harness("codex", "codex.py.tmpl", "cli", "Codex (`codex exec`, from npm) run against the session's Responses API"),
    Harness("claude-code", "claude_code.py.tmpl", "cli",
            "Claude Code (`claude -p`, from npm) run against the session's Messages API"),
)}
FILES = ("agent.py", "tasks.jsonl", "reward.py", "README.md")


class DirectoryNotEmpty(FileExistsError):
    """The target directory holds files and `force` was not given."""


@dataclass(frozen=True)
class Scaffold:
    """What was written: the directory, the task kind (= pool) and the command that trains the agent."""

    directory: Path
    harness: Harness
    kind: str
    command: str
    files: tuple[Path, ...]


def scaffold(directory: str | Path, harness: str, force: bool = False) -> Scaffold:
    """Writes the four files into `directory` (created if missing). A directory with anything in it is refused
    unless `force`, which overwrites the four files and leaves everything else there alone."""
    chosen = HARNESSES[harness]
    target = Path(directory)
    if target.exists() and not target.is_dir():
        raise DirectoryNotEmpty(f"{target} is a file")
    if target.is_dir() and any(target.iterdir()) and not force:
        raise DirectoryNotEmpty(f"{target} is not empty (--force overwrites {', '.join(FILES)} in it)")
    kind = kind_for(target)
    command = train_command(target, kind)
    texts = {
        "agent.py": _template("agents", chosen.agent),
        "tasks.jsonl": _template(chosen.family, "tasks.jsonl"),
        "reward.py": _template(chosen.family, "reward.py.tmpl"),
        "README.md": string.Template(_template("README.md.tmpl")).substitute(
            harness=chosen.name, summary=chosen.summary, directory=target.name, kind=kind, command=command,
            reward=_template(chosen.family, "reward.md")),
    }
    target.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in texts.items():
        (target / name).write_text(text, encoding="utf-8")
        written.append(target / name)
    return Scaffold(target, chosen, kind, command, tuple(written))


def kind_for(directory: Path) -> str:
    """The directory's name as a task kind and pool name: letters, digits, `-` and `_` (a pool name becomes
    part of a consumer group's `<team>.<pool>`, so no dots)."""
    name = re.sub(r"[^A-Za-z0-9_-]+", "-", directory.resolve().name).strip("-")
    return name or "agent"


def train_command(directory: Path, kind: str, passes: int = 10) -> str:
    """Publish the task file `passes` times, then run the agent on those tasks (and no others) until Ctrl-C."""
    tasks, agent = shlex.quote(str(directory / "tasks.jsonl")), shlex.quote(f"{directory / 'agent.py'}:agent")
    return (f"seamlessflow tasks publish {tasks} --pool {kind} --passes {passes} && "
            f"seamlessflow agent run {agent} --pool {kind} --kind {kind}")


def _template(*parts: str) -> str:
    return resources.files("seamlessflow.scaffold").joinpath("templates", *parts).read_text(encoding="utf-8")

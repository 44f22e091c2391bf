"""`seamlessflow init`: every harness scaffolds four files whose Python compiles and whose tasks load; a
directory with files in it is refused without `--force`; the printed command names the directory's kind."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from seamlessflow.agents.tasks import file_tasks
from seamlessflow.cli.main import cli
from seamlessflow.scaffold import HARNESSES, DirectoryNotEmpty, scaffold
from seamlessflow.scaffold.write import FILES

SOURCES = ("agent.py", "reward.py")


def init(*args: str):
    return CliRunner().invoke(cli, ["init", *args], catch_exceptions=False)


@pytest.mark.parametrize("harness", list(HARNESSES))
def test_every_harness_scaffolds_files_that_compile(harness, tmp_path):
    target = tmp_path / "my-agent"
    result = init(str(target), "--harness", harness)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in target.iterdir()) == sorted(FILES)
    for name in SOURCES:
        compile((target / name).read_text(), str(target / name), "exec")
    command = result.stdout.strip()
    assert command == (f"seamlessflow tasks publish {target}/tasks.jsonl --pool my-agent --passes 10 && "
                       f"seamlessflow agent run {target}/agent.py:agent --pool my-agent --kind my-agent")
    readme = (target / "README.md").read_text()
    assert command in readme and "$" not in readme.replace("```bash", "")  # every placeholder filled
    tasks = file_tasks(target / "tasks.jsonl", "my-agent", group_size=4, team="default", run="default", passes=2)
    assert len(tasks) >= 6 and {t.kind for t in tasks} == {"my-agent"} and {t.group_size for t in tasks} == {4}
    assert len({t.group_id for t in tasks}) == len(tasks)  # a pass's groups never merge with another's
    assert all("answer" in json.loads(t.payload_json) for t in tasks)


def test_a_directory_with_files_is_refused_unless_forced(tmp_path):
    target = tmp_path / "mine"
    target.mkdir()
    (target / "notes.txt").write_text("keep me")
    refused = init(str(target), "--harness", "openai")
    assert refused.exit_code == 2 and "not empty" in refused.output and "--force" in refused.output
    assert sorted(p.name for p in target.iterdir()) == ["notes.txt"]

    (target / "agent.py").write_text("# my edits")
    forced = init(str(target), "--harness", "anthropic", "--force")
    assert forced.exit_code == 0, forced.output
    assert (target / "notes.txt").read_text() == "keep me"  # only the scaffold's own files are written
    assert "import anthropic" in (target / "agent.py").read_text()


def test_an_empty_directory_is_taken_and_a_file_is_not(tmp_path):
    (tmp_path / "empty").mkdir()
    assert scaffold(tmp_path / "empty", "codex").kind == "empty"
    (tmp_path / "a-file").write_text("")
    with pytest.raises(DirectoryNotEmpty):
        scaffold(tmp_path / "a-file", "codex", force=True)

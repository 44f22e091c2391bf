"""`seamlessflow init`: every harness scaffolds four files whose Python compiles and whose tasks load; a
directory with files in it is refused without `--force`; the printed command names the directory's kind."""

from __future__ import annotations

import asyncio
import importlib.util
import json

import httpx
import openai
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


def completion_calling(tool: str) -> dict:
    """A chat completion whose only output is a call of `tool` (as an untrained model may write)."""
    call = {"id": "call-1", "type": "function", "function": {"name": tool, "arguments": "{}"}}
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"id": "c-1", "object": "chat.completion", "created": 0, "model": "policy",
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}


@pytest.mark.parametrize("tool", ["subtract", "add"])  # a tool that is not there; the right one, forever
def test_the_agents_sdk_scaffold_scores_a_misbehaving_model_instead_of_failing_the_session(tool, tmp_path):
    """The real OpenAI Agents SDK on a transport that always answers with a tool call: a call of a missing tool
    (ModelBehaviorError) and running out of turns (MaxTurnsExceeded) end the session with reward 0, so the
    mistake is trained on rather than the session being dropped as failed."""
    assert init(str(tmp_path), "--harness", "openai-agents").exit_code == 0
    spec = importlib.util.spec_from_file_location("scaffolded_agent", tmp_path / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    calls = []

    def model(request: httpx.Request) -> httpx.Response:
        calls.append(json.loads(request.content))
        return httpx.Response(200, json=completion_calling(tool))

    task = file_tasks(tmp_path / "tasks.jsonl", "p", group_size=1, team="default", run="default", passes=1)[0]

    async def run():
        async with openai.AsyncOpenAI(base_url="http://proxy.invalid/v1", api_key="k", max_retries=0,
                                      http_client=httpx.AsyncClient(transport=httpx.MockTransport(model))) as client:
            return await module.agent(task, client)

    reward, info = asyncio.run(run())
    assert reward == 0.0 and info["tool_calls"] == 0
    assert info["stopped"].startswith("ModelBehaviorError" if tool == "subtract" else "MaxTurnsExceeded"), info
    assert len(calls) == (1 if tool == "subtract" else 4) and calls[0]["tool_choice"]["function"]["name"] == "add"


def test_the_tool_scaffolds_reward_gives_a_near_miss_partial_credit_and_no_number_nothing(tmp_path):
    """A new agent's first answers are mostly wrong: a graded reward still tells a near miss from a wild one, so
    the first groups carry signal (issue #64)."""
    from seamlessflow.user_code import load_function

    assert init(str(tmp_path), "--harness", "openai").exit_code == 0
    reward = load_function(f"{tmp_path / 'reward.py'}:reward")
    task = next(t for t in file_tasks(tmp_path / "tasks.jsonl", "p", 1, "default", "default")
                if json.loads(t.payload_json)["answer"] == "267")
    assert reward(task, "267") == reward(task, "The sum is 267.") == 1.0
    assert reward(task, "1267") < 0.5  # not inside a longer number
    near, far = reward(task, "266"), reward(task, "300")
    assert 0.49 < near < 0.5 and 0 < far < near
    assert reward(task, "") == reward(task, "no idea") == reward(task, "5000") == 0.0

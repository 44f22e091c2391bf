"""The first-run helper reads the pass lines `agent run` prints (seamlessflow/cli/agent_passes.py)."""

from seamlessflow.agents.episode import DONE, SessionOutcome
from seamlessflow.agents.tasks import file_tasks
from seamlessflow.cli.agent_passes import PassReport
from seamlessflow.testing.first_run import PoolRun, read_passes


def test_the_pass_lines_agent_run_prints_are_read_back(tmp_path):
    (tmp_path / "tasks.jsonl").write_text('{"task_id": "a", "prompt": "?", "answer": "1"}\n')
    lines: list[str] = []
    report = PassReport(None, lambda: 5, lines.append)
    for task, reward in zip(file_tasks(tmp_path / "tasks.jsonl", "k", 1, "default", "default", passes=2), (0.25, 0.5),
                            strict=True):
        report.task_done(task, [SessionOutcome("s", 0, DONE, reward)])
    pool = PoolRun("openai", "cmd", output="\n".join(["some log line", *lines]))
    read_passes(pool)
    assert (pool.means, pool.versions, pool.passes) == ({1: 0.25, 2: 0.5}, {1: 5, 2: 5}, 2)
    assert pool.first_and_last == (0.25, 0.5) and pool.spent_line.startswith("the 2 published passes are spent")

"""`seamlessflow agent run` started by hand reaches the running stack's proxy without `--proxy-url`."""

import yaml

from seamlessflow.cli.agent import running_proxy_url
from seamlessflow.config import Settings


def test_the_proxy_is_the_running_stacks_unless_the_agents_section_names_one(tmp_path):
    settings = Settings(data_dir=tmp_path)
    assert running_proxy_url(settings) is None  # no stack on this data dir: the options' default
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "config.yaml").write_text(yaml.safe_dump({"agents": {"proxy_url": "http://127.0.0.1:8100"}}))
    assert running_proxy_url(settings) == "http://127.0.0.1:8100"
    assert running_proxy_url(settings.with_overrides(agents={"proxy_url": "http://elsewhere:1"})) is None


def test_the_reward_of_each_pass_is_printed_as_it_ends_and_the_run_stops_when_the_passes_are_spent(tmp_path):
    """Tasks as `tasks publish --passes 2` makes them; an aborted session is run again, so it does not count."""
    from seamlessflow.agents.episode import ABORTED, DONE, SessionOutcome
    from seamlessflow.agents.tasks import file_tasks
    from seamlessflow.cli.agent_passes import PassReport

    (tmp_path / "tasks.jsonl").write_text('{"task_id": "a", "prompt": "?", "answer": "1"}\n'
                                          '{"task_id": "b", "prompt": "?", "answer": "2"}\n')
    tasks = file_tasks(tmp_path / "tasks.jsonl", "k", group_size=2, team="default", run="default", passes=2)
    lines, stopped = [], []
    report = PassReport(lambda: stopped.append(True), lambda: 7, lines.append)
    rewards = {"a.p0": [0.0, 0.5], "b.p0": [0.5, 0.0], "a.p1": [1.0, 0.5], "b.p1": [1.0, 1.0]}
    for task in tasks:
        outcomes = [SessionOutcome(f"s{i}", i, DONE, r) for i, r in enumerate(rewards[task.task_id])]
        report.task_done(task, [*outcomes, SessionOutcome("x", 9, ABORTED, 0.0)])
    assert lines == ["pass 1/2: mean reward 0.250 over 4 sessions (policy version 7)",
                     "pass 2/2: mean reward 0.875 over 4 sessions (policy version 7)",
                     "the 2 published passes are spent: mean reward 0.250 in the first, 0.875 in the last; "
                     "`seamlessflow tasks publish` again for more"]
    assert stopped == [True]


def test_a_pass_waits_for_the_policy_to_move_after_the_one_before_it_ended(tmp_path):
    """`agent run` paces a task file's passes: the second starts once the served version moved past the one the
    first ended on (or the patience ran out), and says once why it waits."""
    from seamlessflow.agents.episode import DONE, SessionOutcome
    from seamlessflow.agents.tasks import file_tasks
    from seamlessflow.cli.agent_passes import PassReport

    (tmp_path / "tasks.jsonl").write_text('{"task_id": "a", "prompt": "?", "answer": "1"}\n')
    first, second = file_tasks(tmp_path / "tasks.jsonl", "k", group_size=1, team="default", run="default", passes=2)
    version, now, lines = [3], [0.0], []
    report = PassReport(None, lambda: version[0], lines.append, patience_s=60.0, clock=lambda: now[0])
    assert report.may_start(first) and not report.may_start(second)
    report.task_done(first, [SessionOutcome("s", 0, DONE, 0.5)])
    assert not report.may_start(second) and not report.may_start(second)
    assert lines[-1] == "pass 2/2 waits for a policy newer than version 3 (at most 60 s)"  # told once
    version[0] = 4
    assert report.may_start(second)

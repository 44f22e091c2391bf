import pytest

from seamlessflow.tasks.arithmetic import ArithmeticTask, generate_tasks
from seamlessflow.tasks.loader import load_tasks, write_tasks


def test_round_trip(tmp_path):
    tasks = generate_tasks(seed=5, count=10)
    path = tmp_path / "tasks.jsonl"
    write_tasks(path, tasks)
    assert load_tasks(path) == tasks


def test_blank_lines_are_skipped(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"task_id": "a", "prompt": "What is 1+1?", "answer": 2}\n\n')
    assert load_tasks(path) == [ArithmeticTask("a", "What is 1+1?", "2")]


def test_missing_field_names_the_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    path.write_text('{"task_id": "a", "prompt": "What is 1+1?", "answer": "2"}\n{"task_id": "b"}\n')
    with pytest.raises(ValueError, match=r"tasks.jsonl:2: missing field\(s\) prompt, answer"):
        load_tasks(path)


def test_a_task_files_other_fields_travel_with_the_task(tmp_path):
    path = tmp_path / "code.jsonl"
    path.write_text(
        '{"task_id": "c1", "prompt": "Write add", "answer": "", "function": "add", "tests": [[[1, 2], 3]]}\n'
    )
    [task] = load_tasks(path)
    assert dict(task.extra) == {"function": "add", "tests": [[[1, 2], 3]]}
    write_tasks(tmp_path / "again.jsonl", [task])
    assert load_tasks(tmp_path / "again.jsonl") == [task]

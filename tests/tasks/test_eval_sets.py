"""Each task source has a fixed eval set: held out for the seeded demo, a file's own for a JSONL source."""

from seamlessflow.tasks import generate_tasks, write_tasks
from seamlessflow.tasks.eval_sets import eval_set


def test_the_demo_eval_set_is_fixed_and_drawn_apart_from_training():
    first, again = eval_set("demo", 32, max_operand=999), eval_set("demo", 32, max_operand=999)
    assert first == again and len(first) == 32
    assert all(t.task_id.startswith("eval-") for t in first)
    training = {t.prompt for t in generate_tasks(0, 256, 999)}
    assert sum(t.prompt in training for t in first) <= 1  # another seed: overlap only by chance


def test_a_file_source_uses_its_eval_file_or_else_its_first_tasks(tmp_path):
    source, held_out = tmp_path / "train.jsonl", tmp_path / "eval.jsonl"
    write_tasks(source, generate_tasks(1, 10))
    write_tasks(held_out, generate_tasks(2, 5))
    assert eval_set(str(source), 3) == generate_tasks(1, 10)[:3]
    assert eval_set(str(source), 64, eval_file=str(held_out)) == generate_tasks(2, 5)

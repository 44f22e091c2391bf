from seamlessflow.model.build import corpus_text
from seamlessflow.model.warmstart import answer_text, restates
from seamlessflow.tasks import generate_tasks, score_completion


def test_restated_answers_score_like_wrong_ones_and_plain_ones_score_one():
    task = generate_tasks(5, 1)[0]
    assert score_completion(answer_text(task), task.answer) == 1.0
    assert answer_text(task, restate=True).endswith(f"={task.answer}")
    assert score_completion(answer_text(task, restate=True), task.answer) < 1.0


def test_restating_share_follows_the_fraction_and_is_stable_per_task():
    tasks = generate_tasks(5, 2000)
    share = sum(restates(t, 0.5) for t in tasks) / len(tasks)
    assert 0.45 < share < 0.55
    assert not any(restates(t, 0.0) for t in tasks) and all(restates(t, 1.0) for t in tasks)
    assert [restates(t, 0.5) for t in tasks] == [restates(t, 0.5) for t in tasks]


def test_the_tokenizer_corpus_carries_the_restated_form():
    tasks = generate_tasks(5, 50)

    def answers(fraction):
        return [line.split("\n")[1] for line in corpus_text(tasks, fraction) if line.startswith("What is")]

    assert all("=" in a for a in answers(1.0)) and len(answers(1.0)) == 50
    assert not any("=" in a for a in answers(0.0))

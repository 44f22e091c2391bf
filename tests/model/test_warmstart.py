import pytest

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


def test_a_calculator_answer_is_the_call_the_agent_parses_with_the_questions_operands():
    from seamlessflow.model.warmstart import uses_tool
    from seamlessflow.tasks.calculator import calculate, parse_tool_call

    task = generate_tasks(5, 1, 999)[0]
    call = parse_tool_call(answer_text(task, tool=True))
    assert call is not None and calculate(*call) == task.answer
    tasks = generate_tasks(5, 2000)
    assert 0.21 < sum(uses_tool(t, 0.25) for t in tasks) / len(tasks) < 0.29
    both = sum(uses_tool(t, 0.5) and restates(t, 0.5) for t in tasks) / len(tasks)
    assert 0.2 < both < 0.3  # drawn apart from restating: about a quarter of the tasks do both


def test_the_tokenizer_corpus_carries_the_calculator_calls():
    tasks = generate_tasks(5, 50, 999)
    calls = [line for line in corpus_text(tasks, 0.0, 1.0) if '\n[calculator(expression="' in line]
    assert len(calls) == 50
    offered = '{"name": "calculator", "parameters": '  # the offered tool, as prompts show it
    assert all(line.startswith(offered) for line in calls)


def test_the_answer_only_loss_is_the_models_own_causal_lm_loss():
    """The warm start runs the head on the answer positions only; the loss must be what HF computes over all."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from seamlessflow.model.tokenizer import train_tokenizer
    from seamlessflow.model.warmstart import answer_loss, collate, example_ids

    tasks = generate_tasks(0, 40)
    tokenizer = train_tokenizer(corpus_text(tasks), vocab_size=300)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1))
    batch = collate([example_ids(tokenizer, task) for task in tasks[:8]], tokenizer.pad_token_id)
    assert answer_loss(model, batch).item() == pytest.approx(model(**batch).loss.item(), rel=1e-5)


def test_a_copy_example_asks_for_the_calculator_in_other_words_and_answers_with_the_call():
    """Copy practice: a prompt the agent never sends, answered with the call on the question's own operands."""
    from seamlessflow.model.tokenizer import train_tokenizer
    from seamlessflow.model.warmstart import IGNORE_INDEX, copy_example_ids, example_ids, offered_tools

    task = generate_tasks(0, 1, 999)[0]
    tokenizer = train_tokenizer(corpus_text(generate_tasks(0, 40, 999), tool_fraction=0.25), vocab_size=320)
    tools = offered_tools(0.25)
    ids, labels = copy_example_ids(tokenizer, task, tools)
    answer = tokenizer.decode([t for t in labels if t != IGNORE_INDEX], skip_special_tokens=True)
    assert answer == answer_text(task, tool=True)
    demo_ids, _ = example_ids(tokenizer, task, tool=True, tools=tools)
    assert ids != demo_ids and "Use the calculator on" in tokenizer.decode(ids)

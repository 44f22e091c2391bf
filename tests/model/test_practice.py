"""The scaffold practice is the conversation `init`'s tool-loop agents hold: their own tool, as each SDK sends it,
their own instructions, and a reply the engine lets the model write."""

import importlib.util
import json

import pytest

from seamlessflow.model.practice import (
    INSTRUCTIONS,
    TOOLS,
    arguments_text,
    corpus_lines,
    first_turn,
    near_miss,
    practice_turns,
    second_turn,
    turn_ids,
)
from seamlessflow.model.tokenizer import train_tokenizer
from seamlessflow.scaffold import scaffold


def scaffolded(tmp_path, harness: str):
    made = scaffold(tmp_path / harness, harness, force=True)
    spec = importlib.util.spec_from_file_location(f"scaffold_{harness.replace('-', '_')}", made.directory / "agent.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_each_harness_offers_the_tool_as_its_sdk_sends_it_in_the_same_key_order(tmp_path):
    """The template renders a tool's parameters in the order the request holds them: each order is its own prompt."""
    pytest.importorskip("agents")
    pytest.importorskip("langchain_core")
    from agents.models.chatcmpl_converter import Converter
    from langchain_core.utils.function_calling import convert_to_openai_tool

    openai_agent = scaffolded(tmp_path, "openai")
    anthropic_agent = scaffolded(tmp_path, "anthropic")
    sent = {
        "openai": openai_agent.ADD,
        "anthropic": {"type": "function", "function": {
            "name": anthropic_agent.ADD["name"], "description": anthropic_agent.ADD["description"],
            "parameters": anthropic_agent.ADD["input_schema"]}},
        "openai-agents": Converter.tool_to_openai(scaffolded(tmp_path, "openai-agents").add),
        "langgraph": convert_to_openai_tool(scaffolded(tmp_path, "langgraph").add),
    }
    for harness, tool in sent.items():
        ours = TOOLS["openai" if harness == "anthropic" else harness]
        assert json.dumps(tool) == json.dumps(ours), harness  # key order included
    for harness in sent:
        assert scaffolded(tmp_path, harness).INSTRUCTIONS == INSTRUCTIONS


def test_the_forced_calls_reply_is_its_json_arguments_and_the_answer_is_the_tools_result():
    call = first_turn("openai", 12, 30)
    assert json.loads(call.answer) == {"a": 12, "b": 30} and call.messages[-1]["content"] == "What is 12+30?"
    wrong = second_turn("langgraph", 12, 30, called=(13, 30))
    assert wrong.messages[-1] == {"role": "tool", "tool_call_id": "call_0", "content": "43"} and wrong.answer == "43"
    assert arguments_text(7, 5) == '{"a": 7, "b": 5}'


def test_practice_turns_are_seeded_and_mix_harnesses_turns_and_miscopied_calls():
    turns = practice_turns(3, 1200)
    assert turns == practice_turns(3, 1200) and turns != practice_turns(4, 1200)
    names = {t.tools[0]["function"]["parameters"].get("title", json.dumps(t.tools[0])) for t in turns}
    assert len(names) == 3
    answers = [t for t in turns if len(t.messages) > 2]
    assert len(answers) == 600
    miscopied = [t for t in answers if t.messages[-2]["tool_calls"][0]["function"]["arguments"]
                 != dict(zip("ab", map(int, t.messages[1]["content"][8:-1].split("+")), strict=True))]
    assert 0.18 < len(miscopied) / len(answers) < 0.32


def test_a_near_miss_changes_one_digit_of_one_operand():
    import random

    rng = random.Random(0)
    for _ in range(200):
        a, b = rng.randint(0, 999), rng.randint(0, 999)
        x, y = near_miss(rng, a, b)
        assert (x, y) != (a, b) and (x == a or y == b)


def test_turn_ids_put_the_loss_on_the_reply_alone_after_the_prompt_the_template_renders():
    turns = practice_turns(0, 12)
    tokenizer = train_tokenizer(corpus_lines(turns) + ["user\n", "assistant\n", "system\n", "tools\n"], 400)
    for turn in turns:
        ids, labels = turn_ids(tokenizer, turn)
        prompt = tokenizer.apply_chat_template(turn.messages, tools=turn.tools, add_generation_prompt=True,
                                               tokenize=False)
        reply = [t for t in labels if t != -100]
        assert tokenizer.decode(ids[: len(ids) - len(reply)]) == prompt
        assert tokenizer.decode(reply) == turn.answer + "<|im_end|>"


def test_echo_turns_answer_with_the_tools_result_without_the_tools_line():
    from seamlessflow.model.practice import echo_turns

    turns = echo_turns(1, 200)
    assert turns == echo_turns(1, 200)
    assert all(not t.tools and t.messages[0]["role"] == "user" and t.messages[-1]["role"] == "tool"
               and t.answer == t.messages[-1]["content"] for t in turns)
    tokenizer = train_tokenizer(corpus_lines(turns) + ["user\n", "assistant\n", "tool\n"], 400)
    ids, _ = turn_ids(tokenizer, turns[0])
    assert "tools" not in tokenizer.decode(ids)  # the template renders no tools turn: a short prompt

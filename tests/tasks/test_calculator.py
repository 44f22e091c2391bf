"""The calculator task: a reply is a tool call only when it starts with one; the tool computes exactly; the
text the warm start teaches renders the way the chat template shows a structured call of the tool."""

import json

import pytest

from seamlessflow.model.tokenizer import train_tokenizer
from seamlessflow.tasks.calculator import (
    TOOL,
    calculate,
    call_from_arguments,
    parse_tool_call,
    tool_call_text,
)


def test_a_call_written_by_tool_call_text_parses_back():
    assert tool_call_text("512+389") == '[calculator(expression="512+389")]'
    assert parse_tool_call(tool_call_text("512+389")) == (512, "+", 389)
    assert calculate(512, "+", 389) == "901" and calculate(3, "-", 9) == "-6"


@pytest.mark.parametrize("reply", ["901", 'the answer is [calculator(expression="1+2")]', "[calculator()]",
                                   '[calculator(expression="12")]', '[calc(expression="1+2")]', ""])
def test_anything_else_is_a_direct_answer(reply):
    assert parse_tool_call(reply) is None


def test_a_structured_call_is_read_from_its_json_arguments():
    assert call_from_arguments("calculator", json.dumps({"expression": " 12 - 30 "})) == (12, "-", 30)
    for name, arguments in [("other", '{"expression": "1+2"}'), ("calculator", "not json"),
                            ("calculator", '{"expression": 3}'), ("calculator", "[1]")]:
        assert call_from_arguments(name, arguments) is None


def test_the_taught_text_is_how_the_template_renders_a_call_of_the_offered_tool():
    tokenizer = train_tokenizer(["What is 5+7?", tool_call_text("5+7")], 300)
    call = {"type": "function", "id": "c1", "function": {"name": "calculator", "arguments": {"expression": "5+7"}}}
    rendered = tokenizer.apply_chat_template(
        [{"role": "user", "content": "What is 5+7?"}, {"role": "assistant", "content": "", "tool_calls": [call]}],
        tools=[TOOL], tokenize=False)
    assert '"name": "calculator"' in rendered.split("<|im_end|>")[0]  # the tool is offered
    assert f"<|im_start|>assistant\n{tool_call_text('5+7')}<|im_end|>" in rendered

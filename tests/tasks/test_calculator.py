"""The calculator task: a reply is a tool call only when it starts with one; the tool computes exactly."""

import pytest

from seamlessflow.tasks.calculator import calculate, parse_tool_call, tool_call_text


def test_a_call_written_by_tool_call_text_parses_back():
    assert parse_tool_call(tool_call_text("512+389")) == (512, "+", 389)
    assert calculate(512, "+", 389) == "901" and calculate(3, "-", 9) == "-6"


@pytest.mark.parametrize("reply", ["901", "the answer is CALC 1+2", "CALC", "CALC 12", "calc 1+2", ""])
def test_anything_else_is_a_direct_answer(reply):
    assert parse_tool_call(reply) is None


def test_spacing_and_trailing_text_are_tolerated():
    assert parse_tool_call(" CALC12 + 30 then") == (12, "+", 30)

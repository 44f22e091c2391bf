"""The calculator task: an arithmetic question the policy may answer itself or hand to a calculator tool.

The calculator is a real function tool (`TOOL`, offered in the request's `tools` the way production agents
offer theirs): the policy calls it by writing `[calculator(expression="512+389")]`, the pythonic format that
the tiny model's chat template renders and vLLM's `pythonic` tool-call parser turns into a structured call,
so the agent reads `message.tool_calls` like any OpenAI-style agent, runs the tool, and the result is the
answer. Sums of three-digit numbers are beyond what the tiny model adds reliably in its head, while copying
the question's operands into a call is easy: the return on learning to call the tool (with the right
operands) is large, and the choice is made at the first token of the reply, where RL moves it quickly. (A
second turn that copies the tool's result back was tried first: after its warm start the tiny model kept
adding in its head instead of copying, so the call itself is the action.) Pure (standard library only): the
agent, the warm start and the tests share it.
"""

from __future__ import annotations

import json
import re
from typing import Any

DEMO_MAX_OPERAND = 999
TOOL_NAME = "calculator"
# Bare (no description, no `required`): the tools line is in every prompt, and on the tiny model's vocabulary
# this one is 33 tokens of a 54-token prompt; the longer the prompt, the longer the tiny model's warm start
# takes to learn to copy the question's digits (one with a description still had not, after its 800 steps).
TOOL: dict[str, Any] = {
    "type": "function",
    "function": {"name": TOOL_NAME, "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}},
}
_EXPRESSION = re.compile(r"^\s*(-?\d+)\s*([+-])\s*(-?\d+)\s*$")
_CALL_TEXT = re.compile(rf"^\s*\[{TOOL_NAME}\(expression=(\"[^\"]*\")\)\]")


def tool_call_text(expression: str) -> str:
    """What the policy writes to call the calculator: the pythonic call the chat template renders for an
    assistant turn with this tool call (`[calculator(expression="512+389")]`)."""
    return f"[{TOOL_NAME}(expression={json.dumps(expression)})]"


def parse_expression(expression: Any) -> tuple[int, str, int] | None:
    """(left, op, right) for "a+b" or "a-b", else None (a call the calculator cannot run)."""
    match = _EXPRESSION.match(expression) if isinstance(expression, str) else None
    if match is None:
        return None
    return int(match.group(1)), match.group(2), int(match.group(3))


def call_from_arguments(name: str, arguments: str) -> tuple[int, str, int] | None:
    """A structured tool call as the API returns it (name, JSON arguments) -> the calculation, or None."""
    if name != TOOL_NAME:
        return None
    try:
        return parse_expression(json.loads(arguments).get("expression"))
    except (ValueError, AttributeError):
        return None


def parse_tool_call(reply: str) -> tuple[int, str, int] | None:
    """(left, op, right) when the reply text starts with a calculator call, else None (a direct answer).
    For text decoded without the engine's tool parser (the warm start's own accuracy check)."""
    match = _CALL_TEXT.match(reply)
    if match is None:
        return None
    return parse_expression(json.loads(match.group(1)))


def calculate(left: int, op: str, right: int) -> str:
    return str(left + right if op == "+" else left - right)

"""The calculator task: an arithmetic question the policy may answer itself or hand to a calculator tool.

The policy calls the tool by writing `CALC <a>+<b>`; the agent runs it and the result is the answer. Sums of
three-digit numbers are beyond what the tiny model adds reliably in its head, while copying the question's
operands into a call is easy: the return on learning to call the tool (with the right operands) is large,
and the choice is made at the first token of the reply, where RL moves it quickly. (A second turn that
copies the tool's result back was tried first: after its warm start the tiny model kept adding in its head
instead of copying, so the call itself is the action.) Pure (standard library only): the agent, the warm
start and the tests share it.
"""

from __future__ import annotations

import re

TOOL_PREFIX = "CALC"
DEMO_MAX_OPERAND = 999
_CALL = re.compile(rf"^\s*{TOOL_PREFIX}\s*(-?\d+)\s*([+-])\s*(-?\d+)")


def tool_call_text(expression: str) -> str:
    """What the policy writes to call the calculator ("CALC 512+389")."""
    return f"{TOOL_PREFIX} {expression}"


def parse_tool_call(reply: str) -> tuple[int, str, int] | None:
    """(left, op, right) when the reply starts with a calculator call, else None (a direct answer)."""
    match = _CALL.match(reply)
    if match is None:
        return None
    return int(match.group(1)), match.group(2), int(match.group(3))


def calculate(left: int, op: str, right: int) -> str:
    return str(left + right if op == "+" else left - right)

"""Example 2: multi-turn tool use with a calculator; tool results are appended as messages.

Each turn's prompt repeats the earlier turns, so the proxy's records exercise longest-prefix matching.
A tiny random model will not emit real tool calls: the agent also accepts `CALC: <expr>` in plain text,
and if neither appears it runs the task's own expression, so the episode is still multi-turn.
"""

import ast
import json
import operator
import os
import re

import openai
from openai.types.chat import ChatCompletionMessage, ChatCompletionMessageParam

from seamlessflow.messages import Task
from seamlessflow.tasks import score_completion

MODEL = os.environ.get("SEAMLESSFLOW_MODEL", "policy")
TOOLS = [{"type": "function", "function": {
    "name": "calculator", "description": "Evaluate an arithmetic expression.",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}]
SYSTEM = "You can use a calculator: reply `CALC: <expression>` and you get the result. Then answer with a number."
_OPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def calculate(expression: str) -> str:
    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return node.value
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](value(node.left), value(node.right))
        raise ValueError("not arithmetic")
    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError):
        return "error"


def requested_expression(message: ChatCompletionMessage, fallback: str) -> tuple[str, str]:
    """(tool call id, expression): a real tool call, else `CALC:` text, else the task's own expression."""
    for call in message.tool_calls or []:
        try:
            # only function tools are offered: no custom tool calls
            return call.id, json.loads(call.function.arguments)["expression"]  # type: ignore[union-attr]
        except (ValueError, KeyError, TypeError):
            pass
    found = re.search(r"CALC:\s*([-+*/(). \d]+)", message.content or "")
    return "calc-text", (found.group(1).strip() if found else fallback)


def agent(task: Task, client: openai.OpenAI, tool_turns: int = 2) -> tuple[float, dict[str, int]]:
    payload = json.loads(task.payload_json)
    expression = payload.get("expression") or task.prompt.removeprefix("What is ").rstrip("?")
    messages: list[ChatCompletionMessageParam] = [{"role": "system", "content": SYSTEM},
                                                  {"role": "user", "content": task.prompt}]
    for _ in range(tool_turns):
        reply = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=16, **_tool_args())
        call_id, asked = requested_expression(reply.choices[0].message, expression)
        messages.append({"role": "assistant", "content": reply.choices[0].message.content or ""})
        messages.append({"role": "tool", "tool_call_id": call_id, "content": f"{asked} = {calculate(asked)}"})
    final = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=16)
    answer = final.choices[0].message.content or ""
    return score_completion(answer, payload["answer"]), {"turns": tool_turns + 1}


def _tool_args() -> dict:
    """Native tool calling needs a server started with a tool parser; opt in with SEAMLESSFLOW_NATIVE_TOOLS=1."""
    return {"tools": TOOLS} if os.environ.get("SEAMLESSFLOW_NATIVE_TOOLS") == "1" else {}

"""Scaffold practice: the conversations `seamlessflow init`'s tool-loop agents hold, for the warm start.

Why: the warm start practised only the calculator demo's format, so a newcomer's first own agent (an `init`
scaffold on the default model) scored 0.0 on every session and gave RL no signal. The tool-loop scaffolds
(openai, openai-agents, langgraph, anthropic) all hold the same two-turn conversation, which the engine
renders with the tiny model's template (`seamlessflow/chat_template.py`):

1. system INSTRUCTIONS, user "What is 12+30?", the `add` tool offered and forced (`tool_choice` naming it):
   the engine constrains the reply to the tool's JSON arguments, so the model writes `{"a": 12, "b": 30}`;
2. the same, then the call (rendered `[add(a=12, b=30)]`) and the tool's result ("42"): the model answers
   with the result.

Each harness offers the tool as its SDK writes it (`TOOLS`: key order and fields differ, and the template
keeps them), so each practises its own prompt. A share of the second turns show a call whose operands were
copied wrong, with its (wrong) result: the answer is the tool's result, not the sum in the model's head.
A real model needs none of this; it is what a 4.6 M-parameter model needs to start above zero.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import Any

INSTRUCTIONS = "Use the add tool to add numbers, then answer with the sum."  # the scaffolds' agents/*.py.tmpl
DESCRIPTION = "Add two integers."


def _operand(*order: str, title: str | None = None) -> dict[str, Any]:
    fields: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": 999, "title": title}
    return {name: fields[name] for name in order if fields[name] is not None}


# The `add` tool, as each harness's SDK sends it (tests/model/test_practice.py checks them against the SDKs).
TOOLS: dict[str, dict[str, Any]] = {
    # the plain `openai` and `anthropic` scaffolds write it by hand (the Messages door keeps input_schema's order)
    "openai": {"type": "function", "function": {"name": "add", "description": DESCRIPTION, "parameters": {
        "type": "object", "properties": {"a": _operand("type", "minimum", "maximum"),
                                         "b": _operand("type", "minimum", "maximum")},
        "required": ["a", "b"]}}},
    # LangChain's `convert_to_openai_tool` of a pydantic-annotated `@tool`
    "langgraph": {"type": "function", "function": {"name": "add", "description": DESCRIPTION, "parameters": {
        "properties": {"a": _operand("maximum", "minimum", "type"), "b": _operand("maximum", "minimum", "type")},
        "required": ["a", "b"], "type": "object"}}},
    # the Agents SDK's `function_tool` (pydantic's schema, strict)
    "openai-agents": {"type": "function", "function": {"name": "add", "description": DESCRIPTION, "parameters": {
        "properties": {"a": _operand("maximum", "minimum", "title", "type", title="A"),
                       "b": _operand("maximum", "minimum", "title", "type", title="B")},
        "required": ["a", "b"], "title": "add_args", "type": "object", "additionalProperties": False},
        "strict": True}},
}


@dataclass(frozen=True)
class Turn:
    """One practised reply: the conversation before it, the tools offered, and what the model writes."""

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    answer: str


def arguments_text(a: int, b: int) -> str:
    """What the engine's constrained decoding lets the model write for a forced call: the JSON arguments."""
    return json.dumps({"a": a, "b": b})


def asked(a: int, b: int) -> list[dict[str, Any]]:
    return [{"role": "system", "content": INSTRUCTIONS}, {"role": "user", "content": f"What is {a}+{b}?"}]


def first_turn(harness: str, a: int, b: int) -> Turn:
    return Turn(asked(a, b), [TOOLS[harness]], arguments_text(a, b))


def second_turn(harness: str, a: int, b: int, called: tuple[int, int] | None = None) -> Turn:
    """After the call on `called` (default: the question's operands) and its result: answer with the result."""
    x, y = called or (a, b)
    call = {"id": "call_0", "type": "function", "function": {"name": "add", "arguments": {"a": x, "b": y}}}
    messages = [*asked(a, b), {"role": "assistant", "content": "", "tool_calls": [call]},
                {"role": "tool", "tool_call_id": "call_0", "content": str(x + y)}]
    return Turn(messages, [TOOLS[harness]], str(x + y))


def operands(rng: random.Random) -> tuple[int, int]:
    """One- to three-digit operands, as the scaffold's tasks ask (12+30, 250+17, 408+391, 73+6)."""
    return rng.randint(0, 10 ** rng.randint(1, 3) - 1), rng.randint(0, 10 ** rng.randint(1, 3) - 1)


def near_miss(rng: random.Random, a: int, b: int) -> tuple[int, int]:
    """The operands with one digit of one of them changed: a call copied wrong."""
    which = rng.randrange(2)
    value = (a, b)[which]
    digits = list(str(value))
    spot = rng.randrange(len(digits))
    digits[spot] = str((int(digits[spot]) + rng.randint(1, 9)) % 10)
    wrong = int("".join(digits))
    return (wrong, b) if which == 0 else (a, wrong)


def practice_turns(seed: int, count: int, wrong_call_fraction: float = 0.25) -> list[Turn]:
    """`count` turns, the harnesses and the two turns in turn; the same seed gives the same turns."""
    rng = random.Random(seed)
    harnesses = sorted(TOOLS)
    turns = []
    for index in range(count):
        harness = harnesses[index % len(harnesses)]
        a, b = operands(rng)
        if index // len(harnesses) % 2 == 0:
            turns.append(first_turn(harness, a, b))
        else:
            called = near_miss(rng, a, b) if rng.random() < wrong_call_fraction else None
            turns.append(second_turn(harness, a, b, called))
    return turns


def echo_turns(seed: int, count: int, wrong_call_fraction: float = 0.25) -> list[Turn]:
    """Second turns without the tools line: short prompts (about the demo's length) that teach the one skill the
    scaffold practice alone left weak, answering with the tool's result, from the demo's own batches.

    Measured: with the scaffolds' full turns alone (100 batches of answers), greedy decoding answered with the
    tool's result on 2 % of held-out turns and wrote another number; copying from the tool's turn is what the
    tiny model must learn, and short prompts teach it at a fraction of the cost."""
    rng = random.Random(seed + 7)
    turns = []
    for _ in range(count):
        a, b = operands(rng)
        called = near_miss(rng, a, b) if rng.random() < wrong_call_fraction else None
        turn = second_turn("openai", a, b, called)
        turns.append(Turn(turn.messages[1:], [], turn.answer))  # no system prompt, no tools: the skill alone
    return turns


def corpus_lines(turns: list[Turn]) -> list[str]:
    """What the tokenizer learns merges from: the tools lines, the instructions and the replies."""
    offered = {json.dumps(t.tools[0]["function"]) for t in turns if t.tools}
    asked = [next(m["content"] for m in t.messages if m["role"] == "user") for t in turns]
    return sorted(offered) + [f"{INSTRUCTIONS}\n{q}\n{t.answer}" for q, t in zip(asked, turns, strict=True)]


def turn_ids(tokenizer: Any, turn: Turn, ignore_index: int = -100) -> tuple[list[int], list[int]]:
    """(input ids, labels) of one turn: the prompt as the engine renders it, the loss on the reply and its end."""
    encoded: Any = tokenizer.apply_chat_template(turn.messages, tools=turn.tools or None, add_generation_prompt=True)
    prompt = list(encoded["input_ids"] if hasattr(encoded, "keys") else encoded)  # ids, or a BatchEncoding
    answer = tokenizer(turn.answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt + answer, [ignore_index] * len(prompt) + answer

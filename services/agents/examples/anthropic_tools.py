"""The `anthropic` SDK's tool use, unchanged but for the base URL: a `tool_use` → `tool_result` loop.

    seamlessflow agent run services.agents.examples.anthropic_tools:agent --team red --pool claude

The first turn must use the tool (`tool_choice` names it), later turns choose (`auto`); the loop ends at a
reply without a `tool_use` block, or after `max_turns`. The team's key goes as `x-api-key`.
"""

import anthropic
import openai
from anthropic.types import MessageParam, ToolChoiceParam, ToolParam, ToolResultBlockParam, ToolUseBlock

from seamlessflow.messages import Task
from services.agents.examples.add_tool import INSTRUCTIONS, MODEL, add, proxy_root, reward

TOOLS: list[ToolParam] = [{"name": "add", "description": "Add two integers.", "input_schema": {
    "type": "object", "properties": {name: {"type": "integer", "minimum": 0, "maximum": 999} for name in "ab"},
    "required": ["a", "b"]}}]


def agent(task: Task, client: openai.OpenAI, max_turns: int = 3,
          extra_body: dict | None = None) -> tuple[float, dict[str, int]]:
    claude = anthropic.Anthropic(base_url=proxy_root(client), api_key=client.api_key, max_retries=1)
    messages: list[MessageParam] = [{"role": "user", "content": task.prompt}]
    choice: ToolChoiceParam = {"type": "tool", "name": "add"}
    reply, tool_calls = None, 0
    for _ in range(max_turns):
        reply = claude.messages.create(model=MODEL, system=INSTRUCTIONS, messages=messages, tools=TOOLS,
                                       tool_choice=choice, max_tokens=64, extra_body=extra_body)
        uses = [block for block in reply.content if block.type == "tool_use"]
        if not uses:
            break
        tool_calls += len(uses)
        messages += [{"role": "assistant", "content": reply.content},
                     {"role": "user", "content": [_result(use) for use in uses]}]
        choice = {"type": "auto"}
    answer = "".join(block.text for block in reply.content if block.type == "text") if reply else ""
    return reward(task, answer), {"tool_calls": tool_calls}


def _result(use: ToolUseBlock) -> ToolResultBlockParam:
    try:
        # an argument that is not a number raises TypeError or ValueError, caught below
        content = str(add(int(use.input["a"]), int(use.input["b"])))  # type: ignore[call-overload]
    except (KeyError, TypeError, ValueError):
        content = "error: add takes integers a and b"
    return {"type": "tool_result", "tool_use_id": use.id, "content": content}

"""Example 5 (the demo's default): answer an arithmetic question, or call the calculator function tool.

    seamlessflow agent run services.agents.examples.calculator:agent --team red --pool calc

The request offers the calculator in `tools` like any OpenAI-style agent; the engine's tool-call parser
(`rollout.tool_call_parser`, pythonic for the tiny model) turns a reply such as
`[calculator(expression="512+389")]` into `message.tool_calls`, the agent runs the calculator and its result
is the episode's answer. The reward grades that answer (seamlessflow.tasks.score_completion): a call with the
question's operands copied right earns 1.0, where the tiny model's own three-digit sums mostly miss, so what
RL has to teach is when and how to call the tool.
"""

import json
import os

import openai

from seamlessflow.messages import Task
from seamlessflow.tasks import score_completion
from seamlessflow.tasks.calculator import TOOL, calculate, call_from_arguments

MODEL = os.environ.get("SEAMLESSFLOW_MODEL", "policy")


def agent(task: Task, client: openai.OpenAI) -> tuple[float, dict[str, str | bool]]:
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": task.prompt}], max_tokens=16, temperature=1.0,
        tools=[TOOL])  # type: ignore[list-item]  # TOOL: the tool's JSON (seamlessflow.tasks stays stdlib-only)
    message = reply.choices[0].message
    # only a function tool is offered: no custom tool calls
    calls = [call_from_arguments(c.function.name, c.function.arguments)  # type: ignore[union-attr]
             for c in message.tool_calls or []]
    answer = calculate(*calls[0]) if calls and calls[0] else (message.content or "")
    reward = score_completion(answer, json.loads(task.payload_json)["answer"])
    return reward, {"reply": message.content or "", "tool": bool(message.tool_calls)}

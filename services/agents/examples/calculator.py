"""Example 5 (the demo's default): answer an arithmetic question, or hand it to a calculator tool.

    seamlessflow agent run services.agents.examples.calculator:agent --team red --pool calc

The policy either writes the sum itself or calls the tool with `CALC <a>+<b>`; the agent then runs the
calculator and its result is the episode's answer. The reward grades that answer
(seamlessflow.tasks.score_completion): a call with the question's operands copied right earns 1.0, where
the tiny model's own three-digit sums mostly miss, so what RL has to teach is when and how to call the tool.
"""

import json
import os

from seamlessflow.tasks import score_completion
from seamlessflow.tasks.calculator import calculate, parse_tool_call

MODEL = os.environ.get("SEAMLESSFLOW_MODEL", "policy")


def agent(task, client):
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": task.prompt}], max_tokens=16, temperature=1.0)
    text = reply.choices[0].message.content or ""
    call = parse_tool_call(text)
    answer = calculate(*call) if call is not None else text
    reward = score_completion(answer, json.loads(task.payload_json)["answer"])
    return reward, {"reply": text, "tool": call is not None}

"""Example 1: one question, one answer, a verifiable reward (the arithmetic demo task).

    seamlessflow agent run services.agents.examples.single_turn:agent --team red --pool arith
"""

import json
import os

import openai

from seamlessflow.messages import Task
from seamlessflow.tasks import score_completion  # the demo task's own scorer (pure, stdlib only)

MODEL = os.environ.get("SEAMLESSFLOW_MODEL", "policy")  # the proxy may replace it with its served model


def agent(task: Task, client: openai.OpenAI) -> tuple[float, dict[str, str]]:
    reply = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": task.prompt}], max_tokens=16, temperature=1.0)
    answer = reply.choices[0].message.content or ""
    return score_completion(answer, json.loads(task.payload_json)["answer"]), {"answer": answer}

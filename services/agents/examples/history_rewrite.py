"""Example 3: an agent that rewrites its history mid-episode (summarises its first attempt away).

Turn 3's prompt no longer contains turn 1's answer as generated, so it matches the session only up to the
question: the session forks and its trajectories have several branches.
"""

import json
import os

import openai
from openai.types.chat import ChatCompletionMessageParam, ChatCompletionUserMessageParam

from seamlessflow.messages import Task
from seamlessflow.tasks import score_completion

MODEL = os.environ.get("SEAMLESSFLOW_MODEL", "policy")


def ask(client: openai.OpenAI, messages: list[ChatCompletionMessageParam]) -> str:
    reply = client.chat.completions.create(model=MODEL, messages=messages, max_tokens=16)
    return reply.choices[0].message.content or ""


def agent(task: Task, client: openai.OpenAI) -> tuple[float, dict[str, str]]:
    question: ChatCompletionUserMessageParam = {"role": "user", "content": task.prompt}
    first = ask(client, [question])
    second = ask(client, [question, {"role": "assistant", "content": first},
                          {"role": "user", "content": "Check that answer carefully."}])
    summary = f"(An earlier attempt said {first[:12]!r}; it may be wrong.)"  # replaces turns 1-2
    final = ask(client, [question, {"role": "user", "content": summary + " Answer with one number."}])
    answer = json.loads(task.payload_json)["answer"]
    return score_completion(final, answer), {"first": first, "second": second, "final": final}

"""The one function tool every framework example is given, and what they share: the model name, the task's
numbers and the reward.

A task is the demo's "What is a + b?" (payload `{"answer": "<a+b>"}`); an agent is rewarded when its final
answer holds the sum (`seamlessflow.tasks.score_completion`), whoever computed it.
"""

import json
import os
from typing import Annotated

import openai
from pydantic import Field

from seamlessflow.messages import Task
from seamlessflow.tasks import score_completion

MODEL = os.environ.get("SEAMLESSFLOW_MODEL", "policy")
INSTRUCTIONS = "Use the add tool to add numbers, then answer with the sum."
# the demo's operands; bounds in the schema also keep a constrained model's JSON arguments short
Operand = Annotated[int, Field(ge=0, le=999)]


def add(a: Operand, b: Operand) -> int:
    """Add two integers."""
    return a + b


def reward(task: Task, answer: str) -> float:
    return score_completion(answer or "", json.loads(task.payload_json)["answer"])


def proxy_root(client: openai.OpenAI | openai.AsyncOpenAI) -> str:
    """The session's URL without `/v1`: where SDKs that add `/v1` themselves (anthropic) are pointed."""
    return str(client.base_url).rstrip("/").removesuffix("/v1")

"""A pydantic-ai agent with one function tool, on its OpenAI chat model, unchanged but for the client.

    seamlessflow agent run services.agents.examples.pydantic_ai_agent:agent --team red --pool pyd

The first step must call a tool (a capability sets `tool_choice: required` for step 1 only, as pydantic-ai
asks for per-step choices); later steps choose, so the agent can answer in text.
"""

from dataclasses import dataclass
from typing import Any

import openai
from pydantic_ai import Agent, AgentModelSettings
from pydantic_ai.capabilities import AbstractCapability
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.settings import ModelSettings

from seamlessflow.messages import Task
from services.agents.examples.add_tool import INSTRUCTIONS, MODEL, add, reward


@dataclass
class ToolFirst(AbstractCapability):
    """Forces a function tool call on the run's first model request."""

    def get_model_settings(self) -> AgentModelSettings[Any]:
        return lambda ctx: {"tool_choice": "required"} if ctx.run_step <= 1 else {}


async def agent(task: Task, client: openai.AsyncOpenAI,
                extra_body: dict | None = None) -> tuple[float, dict[str, bool]]:
    model = OpenAIChatModel(MODEL, provider=OpenAIProvider(openai_client=client))
    settings: ModelSettings = {"max_tokens": 64}
    if extra_body:
        settings["extra_body"] = extra_body
    adder = Agent(model, instructions=INSTRUCTIONS, tools=[add], model_settings=settings, capabilities=[ToolFirst()])
    result = await adder.run(task.prompt)
    called = any(part.part_kind == "tool-return" for message in result.all_messages() for part in message.parts)
    return reward(task, result.output), {"tool": called}

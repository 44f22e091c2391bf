"""The OpenAI Agents SDK, unchanged: an `Agent` with one function tool, run on the Responses API
(`responses_agent`, the SDK's default model) or on Chat Completions (`chat_agent`).

    seamlessflow agent run services.agents.examples.openai_agents_sdk:responses_agent --team red --pool sdk

The SDK is pointed at the session through the client the worker hands over (`AsyncOpenAI`, since these
agents are `async def`). The first step must call the tool (`tool_choice` names it); the SDK then resets the
choice to `auto` (`reset_tool_choice`), so the agent can answer. Tracing is off: it would upload to OpenAI.

On the Responses API a reply cut at `max_tokens` is `response.incomplete`, which the SDK raises as an error;
an untrained model's free-text turn often is. So `responses_agent` answers with the tool's result
(`tool_use_behavior="stop_on_first_tool"`, one model call); `chat_agent` reads the result and answers.
"""

from typing import Literal

import openai
from agents import (
    Agent,
    Model,
    ModelSettings,
    OpenAIChatCompletionsModel,
    OpenAIResponsesModel,
    RunConfig,
    Runner,
    function_tool,
)

from seamlessflow.messages import Task
from services.agents.examples.add_tool import INSTRUCTIONS, MODEL, add, reward

ADD = function_tool(add)


async def responses_agent(task: Task, client: openai.AsyncOpenAI,
                          extra_body: dict | None = None) -> tuple[float, dict[str, bool]]:
    model = OpenAIResponsesModel(model=MODEL, openai_client=client)
    return await _run(task, model, extra_body, tool_use_behavior="stop_on_first_tool")


async def chat_agent(task: Task, client: openai.AsyncOpenAI,
                     extra_body: dict | None = None) -> tuple[float, dict[str, bool]]:
    return await _run(task, OpenAIChatCompletionsModel(model=MODEL, openai_client=client), extra_body)


async def _run(task: Task, model: Model, extra_body: dict | None,
               tool_use_behavior: Literal["run_llm_again", "stop_on_first_tool"] = "run_llm_again"
               ) -> tuple[float, dict[str, bool]]:
    settings = ModelSettings(tool_choice="add", max_tokens=64, store=False, extra_body=extra_body)
    agent = Agent(name="adder", instructions=INSTRUCTIONS, tools=[ADD], model=model, model_settings=settings,
                  tool_use_behavior=tool_use_behavior)
    result = await Runner.run(agent, task.prompt, max_turns=4, run_config=RunConfig(tracing_disabled=True))
    called = any(item.type == "tool_call_output_item" for item in result.new_items)
    return reward(task, str(result.final_output)), {"tool": called}

"""A LangGraph ReAct agent (`create_react_agent`) on LangChain's `ChatOpenAI.bind_tools`, unchanged but for
the base URL.

    seamlessflow agent run services.agents.examples.langgraph_react:agent --team red --pool graph

The model is chosen per step: bound with the tool forced (`tool_choice="add"`) until a tool result is in
the history, then with `auto`, so the agent both uses the tool and gets to answer.
"""

from typing import Any

import openai
from langchain_core.language_models import LanguageModelInput
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import Runnable
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent
from langgraph.prebuilt.chat_agent_executor import AgentState
from langgraph.runtime import Runtime

from seamlessflow.messages import Task
from services.agents.examples.add_tool import INSTRUCTIONS, MODEL, add, reward

ADD = tool(add)


def agent(task: Task, client: openai.OpenAI, extra_body: dict | None = None) -> tuple[float, dict[str, int]]:
    chat = ChatOpenAI(model=MODEL, base_url=str(client.base_url), max_completion_tokens=64, max_retries=1,
                      api_key=client.api_key,  # type: ignore[arg-type]  # a str: pydantic makes it a SecretStr
                      extra_body=extra_body)
    forced, free = chat.bind_tools([ADD], tool_choice="add"), chat.bind_tools([ADD])

    def model_for(state: AgentState, runtime: Runtime[Any]) -> Runnable[LanguageModelInput, AIMessage]:
        return free if any(isinstance(m, ToolMessage) for m in state["messages"]) else forced

    graph = create_react_agent(model_for, [ADD], prompt=INSTRUCTIONS)
    state = graph.invoke({"messages": [("user", task.prompt)]}, {"recursion_limit": 8})
    tool_calls = sum(isinstance(m, ToolMessage) for m in state["messages"])
    return reward(task, str(state["messages"][-1].content)), {"tool_calls": tool_calls}

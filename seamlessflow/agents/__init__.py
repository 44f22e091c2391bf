"""Agent SDK and worker: run user agents on the shared tasks topic against the trajectory proxy.

An agent is a function `agent(task, client) -> reward | (reward, info)`; `client` is an `openai.OpenAI`
(or `openai.AsyncOpenAI` for an `async def`) already bound to a fresh proxy session with the team's key.
Agent code imports nothing from the trainer. Agents are found and their rewards read by
`seamlessflow.user_code`, which reward workers and the evaluation share.
"""

from seamlessflow.agents.episode import SessionOutcome
from seamlessflow.agents.options import AgentOptions, consumer_group
from seamlessflow.agents.proxy import EndRejected, ProxyClient, ProxyUnavailable, SessionEnd, session_base_url
from seamlessflow.agents.tasks import make_task, publish_tasks
from seamlessflow.agents.worker import POOL_HEADER, AgentWorker, WorkerFailed, WorkerStats

__all__ = [
    "AgentOptions", "AgentWorker", "EndRejected", "POOL_HEADER", "ProxyClient", "ProxyUnavailable",
    "SessionEnd", "SessionOutcome", "WorkerFailed", "WorkerStats", "consumer_group",
    "make_task", "publish_tasks", "session_base_url",
]

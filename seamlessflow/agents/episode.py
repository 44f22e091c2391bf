"""One session of a task: call the user's agent with an OpenAI client bound to a fresh proxy session, then
end the session on the proxy with the reward and status.

Agent functions take `(task, client)` and return a reward (a number) or `(reward, info_dict)`, or raise;
or they return `Unscored(submission)` to leave the reward to a reward worker (seamlessflow/rewards).
A plain `def` gets a sync `openai.OpenAI` client and runs in a worker thread; an `async def` gets an
`openai.AsyncOpenAI` client and runs in its own event loop in that thread (its `episode_timeout_s` is
enforced). Both clients are already pointed at `.../sessions/{session_id}/v1` with the team's key, and
carry `X-Session-Profile` when the task's payload declares `"session_profile"` (prefill | decode), so the
proxy routes the session to hardware that suits it.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import math
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import httpx
import openai

from seamlessflow.agents.options import AgentOptions
from seamlessflow.agents.proxy import ProxyClient, SessionEnd, session_base_url
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.messages import Task
from seamlessflow.rewards.request import REQUEST_KEY, Unscored, request_for
from seamlessflow.user_code import parse_result

CALL_REWARDS = "call_rewards"  # in an agent's info: rewards of single calls (README: Rewards per turn)

DONE, FAILED, ABORTED = EpisodeStatus.DONE, EpisodeStatus.FAILED, EpisodeStatus.ABORTED


@dataclass(frozen=True)
class SessionOutcome:
    """What happened to one session; `end_error` is set when the proxy did not accept the end."""

    session_id: str
    index: int
    status: EpisodeStatus
    reward: float
    info: dict[str, Any] = field(default_factory=dict)
    end_error: BaseException | None = None


def failure_status(attempt: int, max_attempts: int) -> EpisodeStatus:
    """A failed session is retried (ended as aborted) until its task's last attempt, then ends failed."""
    return ABORTED if attempt + 1 < max_attempts else FAILED


def profile_headers(task: Task) -> dict[str, str] | None:
    """`X-Session-Profile` from the task's payload (`{"session_profile": "decode", ...}`), if it names one."""
    try:
        payload = json.loads(getattr(task, "payload_json", None) or "{}")
    except ValueError:
        return None
    profile = payload.get("session_profile") if isinstance(payload, dict) else None
    return {"X-Session-Profile": str(profile)} if profile else None


def call_agent(fn: Callable, task: Task, base_url: str, key: str, opts: AgentOptions,
               http_client: httpx.Client | None = None) -> Any:
    if inspect.iscoroutinefunction(fn):
        return asyncio.run(_call_async(fn, task, base_url, key, opts))
    client = openai.OpenAI(base_url=base_url, api_key=key, timeout=opts.request_timeout_s,
                           max_retries=opts.client_max_retries,
                           http_client=http_client,  # type: ignore[arg-type]  # openai also takes an httpx.Client; its hint names only httpx2's
                           default_headers=profile_headers(task))
    return fn(task, client)


async def _call_async(fn: Callable, task: Task, base_url: str, key: str, opts: AgentOptions) -> Any:
    async with openai.AsyncOpenAI(base_url=base_url, api_key=key, timeout=opts.request_timeout_s,
                                  max_retries=opts.client_max_retries, default_headers=profile_headers(task)) as client:
        async with asyncio.timeout(opts.episode_timeout_s):
            return await fn(task, client)


def run_session(fn: Callable, task: Task, session_id: str, index: int, key: str, opts: AgentOptions,
                proxy: ProxyClient, info: dict[str, Any], http_client: httpx.Client | None = None) -> SessionOutcome:
    """Runs the agent once and ends its session; never raises (errors are in the outcome)."""
    base_url = session_base_url(opts.proxy_url, session_id)
    try:
        result = call_agent(fn, task, base_url, key, opts, http_client)
        if isinstance(result, Unscored):  # a reward worker scores it later (seamlessflow/rewards)
            request = request_for(result, task.prompt, task.payload_json, opts.verifier)
            reward, agent_info = 0.0, {**result.info, REQUEST_KEY: request.as_info()}
        else:
            reward, agent_info = parse_result(result)
        status, info = DONE, {**info, **agent_info}
    except Exception as exc:  # the agent's failure is data: it decides the session's status
        status, reward = failure_status(task.attempt, opts.max_attempts), opts.failure_reward
        info = {**info, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc(limit=5)}
    return end_session(task, session_id, index, opts, proxy, status, reward, info)


def call_rewards_of(info: dict[str, Any]) -> tuple[dict[str, float], dict[str, Any]]:
    """The per-call rewards an agent put in its info, and the rest of the info. Ones the proxy would refuse are
    left out with the reason in the info, so the agent's mistake costs them, not the session's end."""
    calls, rest = info.get(CALL_REWARDS) or {}, {k: v for k, v in info.items() if k != CALL_REWARDS}
    valid = isinstance(calls, dict) and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        and ((isinstance(k, int) and 0 <= k < 1_000_000) or (isinstance(k, str) and 0 < len(k) <= 128))
        for k, v in calls.items())
    if not valid:
        return {}, {**rest, "call_rewards_error": f"not {{position or call key: finite number}}: {str(calls)[:200]}"}
    return {str(k): float(v) for k, v in calls.items()}, rest


def end_session(task: Task, session_id: str, index: int, opts: AgentOptions, proxy: ProxyClient, status: EpisodeStatus,
                reward: float, info: dict[str, Any]) -> SessionOutcome:
    """Ends the session on the proxy; never raises (a refused end is in the outcome). An agent's
    ``info["call_rewards"]`` ({position or call key: reward}) goes on the end as its per-call rewards."""
    calls, rest = call_rewards_of(info)
    end = SessionEnd(reward, status, task.group_id, task.task_id, rest, calls)
    try:
        proxy.end_session(session_id, end, opts.end_timeout_s)
    except Exception as exc:
        return SessionOutcome(session_id, index, status, reward, info, end_error=exc)
    return SessionOutcome(session_id, index, status, reward, info)

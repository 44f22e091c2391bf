"""One evaluation pass: the training agent, run once per eval task with greedy decoding, through the proxy.

The agent is the user's own function (the one the agent pool runs), so the eval asks exactly the way
training does; only its client is wrapped (`GreedyClient`) to force `temperature=0` and count generated
tokens. Every session is ended on the proxy with an eval group id (`core.evaluation.eval_group_id`), so it
is recorded like any other session (replay shows it) and dropped by the trainer and the scheduler.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import openai

from seamlessflow.agents.proxy import ProxyClient, SessionEnd, session_base_url
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.core.evaluation import EvalOutcome, eval_group_id
from seamlessflow.messages import Task, new_id, now_ms
from seamlessflow.tasks.arithmetic import ArithmeticTask, expression_of
from seamlessflow.user_code import parse_result

log = logging.getLogger("seamlessflow.evaluation")


class GreedyClient:
    """An OpenAI client whose chat completions are greedy (temperature 0, no nucleus) and counted."""

    def __init__(self, client: Any):
        self._client = client
        self.generated_tokens = 0
        self.chat = _Chat(self)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)

    def _create(self, **kwargs: Any) -> Any:
        kwargs.update(temperature=0.0, n=1)
        kwargs.pop("top_p", None)
        reply = self._client.chat.completions.create(**kwargs)
        usage = getattr(reply, "usage", None)
        self.generated_tokens += int(getattr(usage, "completion_tokens", 0) or 0)
        return reply


class _Chat:
    def __init__(self, owner: GreedyClient):
        self.completions = _Completions(owner)


class _Completions:
    def __init__(self, owner: GreedyClient):
        self.create = owner._create


def eval_task(source: ArithmeticTask, version: int, team: str, run: str, kind: str) -> Task:
    """The Task record an agent gets for one eval question, shaped like the rollout manager's."""
    try:
        expression: str | None = expression_of(source.prompt)
    except ValueError:
        expression = None
    payload = json.dumps({"answer": source.answer, "expression": expression, "source_task_id": source.task_id})
    return Task(new_id(), source.task_id, eval_group_id(run, version, source.task_id), team, run, kind,
                source.prompt, payload, 1, 0, now_ms())


def run_pass(agent: Callable, tasks: Sequence[Task], version: int, proxy: ProxyClient, success_reward: float,
             concurrency: int = 8, timeout_s: float = 120.0) -> list[EvalOutcome]:
    """Runs `agent` on every task (greedy) and ends each session; an agent that raises scores 0."""
    def one(task: Task) -> EvalOutcome:
        session_id = f"eval-{task.run}-v{version}-{new_id()[:12]}"
        raw = openai.OpenAI(base_url=session_base_url(proxy.proxy_url, session_id), api_key=proxy.key,
                            timeout=timeout_s, max_retries=2)
        client = GreedyClient(raw)
        try:
            reward, info = parse_result(agent(task, client))
        except Exception as exc:  # an agent failing on a question is a wrong answer, not a failed pass
            reward, info = 0.0, {"error": f"{type(exc).__name__}: {exc}"}
        finally:
            raw.close()
        end = SessionEnd(reward, EpisodeStatus.DONE, task.group_id, task.task_id, {**info, "eval_version": version})
        answer = proxy.end_session(session_id, end)
        versions = frozenset(int(v) for v in answer.get("versions", ()))  # what generated it (the proxy knows)
        return EvalOutcome(reward, reward >= success_reward, client.generated_tokens, versions)

    with ThreadPoolExecutor(concurrency, thread_name_prefix="eval") as pool:
        return list(pool.map(one, tasks))

import asyncio
from dataclasses import replace

import pytest

from seamlessflow.agents.episode import ABORTED, FAILED, call_agent, failure_status
from seamlessflow.agents.options import AgentOptions
from seamlessflow.agents.proxy import session_base_url
from seamlessflow.messages import Task
from seamlessflow.testing.samples import SAMPLES


def test_failed_sessions_are_retried_until_the_last_attempt():
    assert failure_status(attempt=0, max_attempts=3) == ABORTED
    assert failure_status(attempt=1, max_attempts=3) == ABORTED
    assert failure_status(attempt=2, max_attempts=3) == FAILED
    assert failure_status(attempt=0, max_attempts=1) == FAILED


def test_session_base_url():
    assert session_base_url("http://h:1/", "s1") == "http://h:1/sessions/s1/v1"


def test_an_async_agent_over_its_episode_timeout_raises_timeout_and_none_means_no_limit():
    async def slow(task, client):
        await asyncio.sleep(0.3)
        return 1.0

    with pytest.raises(TimeoutError):
        call_agent(slow, None, "http://127.0.0.1:9/v1", "k", AgentOptions(episode_timeout_s=0.05))
    assert call_agent(slow, None, "http://127.0.0.1:9/v1", "k", AgentOptions()) == 1.0


def test_a_task_that_declares_its_session_profile_gives_the_agent_a_client_that_sends_it():
    task = next(m for m in SAMPLES if isinstance(m, Task))
    declared = replace(task, payload_json='{"answer": 3, "session_profile": "prefill"}')
    seen = lambda t, client: client.default_headers.get("X-Session-Profile")  # noqa: E731
    assert call_agent(seen, declared, "http://127.0.0.1:9/v1", "k", AgentOptions()) == "prefill"
    assert (
        call_agent(seen, replace(task, payload_json='{"answer": 3}'), "http://127.0.0.1:9/v1", "k", AgentOptions())
        is None
    )

    async def seen_async(t, client):
        return client.default_headers.get("X-Session-Profile")

    assert call_agent(seen_async, declared, "http://127.0.0.1:9/v1", "k", AgentOptions()) == "prefill"


def test_an_agent_that_leaves_its_reward_to_a_verifier_ends_done_with_its_request():
    import json

    from seamlessflow.agents.episode import run_session
    from seamlessflow.rewards import Unscored
    from seamlessflow.rewards.request import REQUEST_KEY

    class Proxy:
        def end_session(self, session_id, end, timeout_s):
            self.end = end

    task = replace(next(m for m in SAMPLES if isinstance(m, Task)), payload_json=json.dumps({"answer": "3"}))
    proxy = Proxy()
    outcome = run_session(lambda t, client: Unscored("3", info={"turns": 2}), task, "s1", 0, "k",
                          AgentOptions(verifier="math"), proxy, {"pool": "p"})  # type: ignore[arg-type]
    assert (outcome.status, proxy.end.reward, proxy.end.status) == ("done", 0.0, "done")
    assert proxy.end.info == {"pool": "p", "turns": 2, REQUEST_KEY: {"verifier": "math", "submission": "3",
                                                                     "prompt": task.prompt, "payload": {"answer": "3"}}}

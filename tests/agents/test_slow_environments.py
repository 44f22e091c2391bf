"""An agent pool whose environments are slow, hung or crashing: only their own sessions wait. The pool's
other sessions end (and their tasks commit) while a slow environment is still running; the slow session
ends when it finishes, late, and is accepted like any other; a crashed step ends its session failed."""

from __future__ import annotations

from seamlessflow.agents import AgentOptions, AgentWorker, make_task, publish_tasks
from seamlessflow.testing import environment_steps as environments
from seamlessflow.testing.agent_worker_harness import KEY, committed, end_offsets
from seamlessflow.testing.end_proxy_stand_in import EndProxyStandIn
from seamlessflow.testing.in_process import AgentsThread
from seamlessflow.testing.waiting import wait_until


def test_a_slow_environment_delays_only_its_own_session(settings, codec):
    steps = [("slow", {"seconds": 8.0}), ("hang", {"timeout_s": 2.0}), ("crash", {}), ("fast", {}), ("fast", {}),
             ("fast", {})]
    tasks = [
        make_task("env", "q", {"step": step, **extra}, task_id=f"{step}{i}") for i, (step, extra) in enumerate(steps)
    ]
    with EndProxyStandIn() as proxy:
        options = AgentOptions(proxy_url=proxy.url, concurrency=3, max_attempts=1, end_timeout_s=5.0,
                                revoke_grace_s=2.0)
        running = AgentsThread(AgentWorker(settings, codec, environments.env_agent, "red", KEY, options))
        try:
            publish_tasks(settings, codec, tasks)
            wait_until(lambda: len(proxy.accepted()) == len(tasks), timeout_s=120)
            wait_until(lambda: committed(settings, "red.default") == end_offsets(settings), timeout_s=30)
        finally:
            running.stop()
    ends = proxy.accepted()
    bodies = [(e["body"]["task_id"], e["body"]["status"], e["body"]["reward"]) for e in ends]
    assert bodies[-1] == ("slow0", "done", 0.5)  # last, yet recorded with its reward
    by_task = {task_id: (status, reward) for task_id, status, reward in bodies}
    assert by_task == {"slow0": ("done", 0.5), "hang1": ("failed", 0.0), "crash2": ("failed", 0.0),
                       "fast3": ("done", 1.0), "fast4": ("done", 1.0), "fast5": ("done", 1.0)}
    errors = {e["body"]["task_id"]: e["body"]["info"]["error"] for e in ends if e["body"]["status"] == "failed"}
    assert errors["hang1"].startswith("EnvironmentTimeout") and errors["crash2"].startswith("EnvironmentCrashed")

"""A task whose agent kills the worker process is retried a bounded number of times, then ends failed."""

from __future__ import annotations

import multiprocessing
import signal

from seamlessflow.agents import AgentOptions, AgentWorker, make_task, publish_tasks
from seamlessflow.avro import Codec
from seamlessflow.testing import agent_fns
from seamlessflow.testing.agent_worker_harness import KEY, committed, end_offsets
from seamlessflow.testing.end_proxy_stand_in import EndProxyStandIn
from seamlessflow.testing.in_process import AgentsThread
from seamlessflow.testing.waiting import wait_until


def options(proxy_url: str) -> AgentOptions:
    return AgentOptions(proxy_url=proxy_url, concurrency=1, max_attempts=2, end_timeout_s=1.0, revoke_grace_s=2.0)


def run_doomed_worker(settings, proxy_url: str) -> None:
    """In a fresh process: a worker whose agent kills it."""
    AgentWorker(settings, Codec(), agent_fns.kills_its_worker, "red", KEY, options(proxy_url)).run()


def test_a_task_that_kills_its_workers_ends_failed_after_max_attempts(settings, codec):
    publish_tasks(settings, codec, [make_task("demo", "q", {"reward": 1.0}, task_id="t0")])
    spawn = multiprocessing.get_context("spawn")
    with EndProxyStandIn() as proxy:
        for _ in range(2):  # max_attempts deliveries, each killing its worker
            doomed = spawn.Process(target=run_doomed_worker, args=(settings, proxy.url))
            doomed.start()
            doomed.join(120)
            assert doomed.exitcode == -signal.SIGKILL
        # a third worker must not run the agent again (this one would report "done")
        survivor = AgentsThread(
            AgentWorker(settings, codec, agent_fns.reward_from_payload, "red", KEY, options(proxy.url)))
        wait_until(lambda: survivor.worker.stats.tasks_done == 1)
        stats = survivor.stop()
    [end] = proxy.accepted()  # the doomed workers never got to end their sessions
    assert end["body"]["status"] == "failed" and "workers died" in end["body"]["info"]["error"]
    assert (stats.worker_deaths_seen, stats.sessions) == (1, {"failed": 1})
    assert committed(settings, "red.default") == end_offsets(settings)


def test_a_task_handed_back_and_finished_later_leaves_the_new_holders_journal_entry(settings, codec):
    """After a rebalance the old worker may still finish a task another worker now holds; it must not erase
    the new holder's entry, or a death of the new holder would go uncounted."""
    from seamlessflow.agents.deliveries import DeliveryJournal
    from seamlessflow.agents.worker import TaskRun

    old = AgentWorker(settings, codec, agent_fns.reward_from_payload, "red", KEY, options("http://127.0.0.1:9"))
    task = make_task("demo", "q", {"reward": 1.0}, task_id="t1")
    assert old._journal.deliver(task.event_id) == 0
    run = old._held[task.event_id] = TaskRun(task, 0, 7)
    old._hand_back({0})  # the partition went while the task was still running (the member gave up waiting)
    new_holder = DeliveryJournal(old._journal.path)
    assert new_holder.deliver(task.event_id) == 0  # handed back in order: nobody died
    old._task_finished(run)
    assert new_holder.deliver(task.event_id) == 1  # the new holder's entry survived the old worker's finish
    new_holder.close()
    old._journal.close()

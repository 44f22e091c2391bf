"""The worker against the real broker; the proxy's end endpoint is a stand-in
(seamlessflow/testing/end_proxy_stand_in.py)."""

from __future__ import annotations

import pytest

from seamlessflow.agents import AgentOptions, AgentWorker, WorkerFailed, make_task, publish_tasks
from seamlessflow.kafka.io import read_topic
from seamlessflow.testing import agent_fns
from seamlessflow.testing.agent_worker_harness import KEY, committed, end_offsets
from seamlessflow.testing.end_proxy_stand_in import EndProxyStandIn
from seamlessflow.testing.in_process import AgentsThread
from seamlessflow.testing.poison import assert_dead_lettered, letters, produce_poison
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics


def worker(settings, codec, agent, proxy, team="red", **opts):
    options = AgentOptions(proxy_url=proxy.url, concurrency=3, end_timeout_s=1.0, revoke_grace_s=2.0, **opts)
    return AgentWorker(settings, codec, agent, team, KEY, options)


def last_heartbeat(settings, codec, worker: AgentWorker):
    records = [r.message for r in read_topic(settings, Topics(settings).status, codec)]
    return [s for s in records if getattr(s, "resource_id", None) == worker.resource_id][-1]


def test_group_size_sessions_per_task_ended_then_committed(settings, codec):
    tasks = [make_task("demo", f"q{i}", {"reward": i / 4}, group_size=2, task_id=f"t{i}") for i in range(3)]
    with EndProxyStandIn() as proxy:
        running = AgentsThread(worker(settings, codec, agent_fns.reward_from_payload, proxy))
        publish_tasks(settings, codec, tasks)
        wait_until(lambda: running.worker.stats.tasks_done == 3)
        stats = running.stop()
    ends = proxy.accepted()
    assert stats.sessions == {"done": 6}
    assert sorted(e["body"]["task_id"] for e in ends) == ["t0", "t0", "t1", "t1", "t2", "t2"]
    assert len({e["session_id"] for e in ends}) == 6  # a fresh session per run
    for end in ends:
        task = next(t for t in tasks if t.task_id == end["body"]["task_id"])
        assert end["body"]["group_id"] == task.group_id
        assert end["body"]["status"] == "done"
        assert end["body"]["reward"] == pytest.approx(int(task.task_id[1]) / 4)
        assert end["authorization"] == f"Bearer {KEY}"
        assert end["body"]["info"]["base_url"] == f"{proxy.url}/sessions/{end['session_id']}/v1/"
    assert committed(settings, "red.default") == end_offsets(settings)
    status = last_heartbeat(settings, codec, running.worker)
    assert (status.kind, status.team, status.active_tag, status.state) == ("agent", "red", "default", "stopped")
    assert (status.figures["tasks_done"], status.figures["sessions_done"]) == (3.0, 6.0)


def test_nothing_committed_until_the_proxy_accepts_then_another_worker_redoes_it(settings, codec):
    with EndProxyStandIn() as proxy:
        proxy.answer_status = 503
        first = AgentsThread(worker(settings, codec, agent_fns.reward_from_payload, proxy))
        publish_tasks(settings, codec, [make_task("demo", "q", {"reward": 1.0}, task_id="t0")])
        first.thread.join(60)
        assert isinstance(first.result, WorkerFailed)
        assert committed(settings, "red.default") == {}
        assert last_heartbeat(settings, codec, first.worker).state == "failed"
        proxy.answer_status = 200
        second = AgentsThread(worker(settings, codec, agent_fns.reward_from_payload, proxy))
        wait_until(lambda: second.worker.stats.tasks_done == 1)
        second.stop()
    assert [e["body"]["task_id"] for e in proxy.accepted()] == ["t0"]
    assert committed(settings, "red.default") == end_offsets(settings)


def test_failing_agent_is_retried_by_its_own_pool_only_then_fails(settings, codec):
    with EndProxyStandIn() as proxy:
        red = AgentsThread(worker(settings, codec, agent_fns.always_raises, proxy, max_attempts=2))
        blue = AgentsThread(worker(settings, codec, agent_fns.reward_from_payload, proxy, team="blue"))
        publish_tasks(settings, codec, [make_task("demo", "q", {"reward": 1.0}, group_size=2, task_id="t0")])
        wait_until(lambda: red.worker.stats.tasks_done == 2 and blue.worker.stats.tasks_done == 1)
        red_stats, blue_stats = red.stop(), blue.stop()
    assert red_stats.sessions == {"aborted": 2, "failed": 2}
    assert red_stats.retries_published == 1
    assert blue_stats.sessions == {"done": 2} and blue_stats.tasks_skipped == 1  # the retry was red's
    red_ends = [e["body"] for e in proxy.accepted() if e["body"]["info"]["team"] == "red"]
    assert sorted((e["info"]["attempt"], e["status"]) for e in red_ends) == [
        (0, "aborted"), (0, "aborted"), (1, "failed"), (1, "failed")]
    assert all("environment crashed" in e["info"]["error"] for e in red_ends)
    retry = list(read_topic(settings, Topics(settings).tasks, codec))[-1]
    assert retry.message.attempt == 1 and retry.message.group_size == 2
    assert retry.message.group_id == "t0.g"
    assert committed(settings, "red.default") == end_offsets(settings)


def test_bad_return_value_and_async_agents(settings, codec):
    with EndProxyStandIn() as proxy:
        bad = AgentsThread(worker(settings, codec, agent_fns.returns_text, proxy, max_attempts=1, pool="bad"))
        good = AgentsThread(worker(settings, codec, agent_fns.async_reward, proxy, pool="async"))
        publish_tasks(settings, codec, [make_task("demo", "q", {}, task_id="t0")])
        wait_until(lambda: bad.worker.stats.tasks_done == 1 and good.worker.stats.tasks_done == 1)
        bad.stop(), good.stop()
    by_pool = {e["body"]["info"]["pool"]: e["body"] for e in proxy.accepted()}
    assert by_pool["bad"]["status"] == "failed" and "TypeError" in by_pool["bad"]["info"]["error"]
    assert by_pool["async"]["status"] == "done" and by_pool["async"]["info"]["client"] == "AsyncOpenAI"


def test_rejected_end_goes_to_dead_letter_and_is_committed(settings, codec):
    with EndProxyStandIn() as proxy:
        proxy.answer_status = 404
        running = AgentsThread(worker(settings, codec, agent_fns.reward_from_payload, proxy))
        publish_tasks(settings, codec, [make_task("demo", "q", {"reward": 1.0}, task_id="t0")])
        wait_until(lambda: running.worker.stats.tasks_done == 1)
        running.stop()
    letters = [r.message for r in read_topic(settings, Topics(settings).dead_letter, codec)]
    assert len(letters) == 1 and "rejected" in letters[0].reason
    assert codec.decode(letters[0].value).task_id == "t0"
    assert committed(settings, "red.default") == end_offsets(settings)


def test_poison_tasks_are_dead_lettered_committed_and_the_next_task_runs(settings, codec):
    with EndProxyStandIn() as proxy:
        running = AgentsThread(worker(settings, codec, agent_fns.reward_from_payload, proxy))
        sample = make_task("demo", "q", {"reward": 1.0}, task_id="poison")
        values = produce_poison(settings, codec, Topics(settings).tasks, sample, key=sample.group_id)
        publish_tasks(settings, codec, [make_task("demo", "q", {"reward": 1.0}, task_id="t0")])
        wait_until(lambda: running.worker.stats.tasks_done == 1)
        wait_until(lambda: committed(settings, "red.default") == end_offsets(settings))
        stats = running.stop()
    assert_dead_lettered(letters(settings, codec, "agent:red.default"), values, Topics(settings).tasks)
    assert stats.dead_letters == 3 and stats.tasks_done == 1


def test_a_task_published_for_another_team_is_not_run(settings, codec):
    """Found on `make up-teams`: red's agents ran the tasks of blue's source too (with red's key), so each team's
    adapter trained on the other's task set. The run's team's tasks stay shared by every team's pools."""
    tasks = [make_task("demo", "q", {"reward": 0.5}, group_size=1, task_id=f"t-{team}", team=team)
             for team in ("blue", "red", "default")]
    with EndProxyStandIn() as proxy:
        running = AgentsThread(worker(settings, codec, agent_fns.reward_from_payload, proxy))  # team red
        publish_tasks(settings, codec, tasks)
        wait_until(lambda: running.worker.stats.tasks_done == 2 and running.worker.stats.tasks_skipped == 1)
        running.stop()
    assert sorted(e["body"]["task_id"] for e in proxy.accepted()) == ["t-default", "t-red"]
    assert committed(settings, "red.default") == end_offsets(settings)  # the skipped one is committed too


def test_a_task_the_gate_holds_waits_uncommitted_while_the_others_run(settings, codec):
    """`agent run` paces a task file's passes with the gate: a held task is not run, its offset not committed, and
    the tasks the gate lets through run meanwhile (they may sit on other partitions, behind it in no order)."""
    import threading

    tasks = [make_task("demo", f"q{i}", {"reward": 0.5}, group_size=1, task_id=f"t{i}") for i in range(4)]
    opened = threading.Event()
    with EndProxyStandIn() as proxy:
        gated = worker(settings, codec, agent_fns.reward_from_payload, proxy)
        gated.gate = lambda task: task.task_id != "t0" or opened.is_set()
        running = AgentsThread(gated)
        publish_tasks(settings, codec, tasks)
        wait_until(lambda: gated.stats.tasks_done == 3)
        assert sorted(e["body"]["task_id"] for e in proxy.accepted()) == ["t1", "t2", "t3"]
        assert committed(settings, "red.default") != end_offsets(settings)  # t0's offset is held
        opened.set()
        wait_until(lambda: gated.stats.tasks_done == 4)
        wait_until(lambda: committed(settings, "red.default") == end_offsets(settings))
        running.stop()
    assert sorted(e["body"]["task_id"] for e in proxy.accepted()) == ["t0", "t1", "t2", "t3"]

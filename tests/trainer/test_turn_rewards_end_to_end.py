"""Per-turn rewards end to end: a token-level agent (the openai SDK) runs a group of multi-turn sessions through
the real proxy in front of a real vLLM-CPU engine, rewards single turns (the reward route, by position and by
call key, and the end's `call_rewards`), the real assembler service assembles them on the real broker, and the
trainer's own code path (records to samples, the batch builder, `step_advantages`, the batch layout the loss
reads) gives per-token advantages that follow each configured rule, checked against a computation written
here from what the agent sent. The DeepSpeed step itself is left out (tests/trainer/test_packing.py shows
per-token advantages reaching the loss)."""

from __future__ import annotations

import asyncio
import math

import httpx
import openai
import pytest
import torch

from seamlessflow.core.batching import BatchBuilder
from seamlessflow.core.turn_advantages import AdvantageRule
from seamlessflow.proxy import ProxyOptions
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.assembler_harness import AssemblerProcess, wait_for
from seamlessflow.trainer.options import TrainerOptions
from seamlessflow.trainer.policy_engine import step_advantages
from seamlessflow.trainer.samples import collate, sample_from_record

pytestmark = pytest.mark.slow
KEY = "key-red"
EPS = 1e-6
# per session: the rewards sent per turn (route by position, route by call key, the end's call_rewards), the
# session reward; C has two turns only, so turn 2 has fewer members (both per-turn rules)
PLAN = {
    "tr-a": {"turns": 3, "route": {"0": 0.5, "key-a-1": -0.25}, "end_calls": {"2": 0.3}, "reward": 1.0},
    "tr-b": {"turns": 3, "route": {"1": 1.0}, "end_calls": {}, "reward": 0.0},
    "tr-c": {"turns": 2, "route": {}, "end_calls": {"0": -0.5}, "reward": 1.0},
}


@pytest.fixture
def proxy(settings, tmp_path, vllm_engine, in_process_stack):
    config = ProxyOptions(port=0, engines=[{"id": "e0", "url": vllm_engine.url}], served_model="tiny",
                          listen_control=False, discover_engines=False)
    return in_process_stack.proxy(settings, config, TeamKeys(tmp_path / "teams.json", {"red": KEY}))


async def run_session(proxy, session_id: str, plan: dict) -> tuple[list[int], list[float]]:
    """The agent: each prompt is the previous sequence and a few new ids; turn 1 of tr-a goes with a call key.
    Returns where each turn ends in the sequence and the reward each turn was given (0 where none)."""
    agent = openai.AsyncOpenAI(base_url=proxy.session_url(session_id), api_key=KEY, max_retries=0)
    prompt, ends = [7] * 12, []
    for turn in range(plan["turns"]):
        headers = {"Idempotency-Key": f"key-{session_id[-1]}-{turn}"}
        reply = await agent.completions.create(model="tiny", prompt=prompt, max_tokens=4, temperature=1.0,
                                               extra_body={"return_token_ids": True}, extra_headers=headers)
        sequence = prompt + list(reply.choices[0].model_extra["token_ids"])
        ends.append(len(sequence))
        prompt = sequence + [20 + turn] * 3
    root = proxy.session_url(session_id).removesuffix("/v1")
    auth = {"Authorization": f"Bearer {KEY}"}
    async with httpx.AsyncClient(timeout=30) as http:
        for call, reward in plan["route"].items():
            answer = await http.post(f"{root}/calls/{call}/reward", headers=auth, json={"reward": reward})
            assert answer.status_code == 200, answer.text
        body = {"reward": plan["reward"], "group_id": "g-turns", "task_id": "t-turns",
                "call_rewards": plan["end_calls"]}
        assert (await http.post(f"{root}/end", headers=auth, json=body)).status_code == 200
    given = [0.0] * plan["turns"]
    for call, reward in {**plan["route"], **plan["end_calls"]}.items():
        given[int(call.rsplit("-", 1)[-1]) if call.startswith("key-") else int(call)] = reward
    return ends, given


def unbiased_std(values: list[float]) -> float:
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / max(len(values) - 1, 1))


def expected_per_turn(sent: dict, rule: str, discount: float) -> dict[str, list[float]]:
    """Each session's advantage per turn, worked out from what the agent sent (the session reward counts on
    the last turn): its value (per_turn_group) or return to go (return_to_go) at turn k against the same at
    turn k of the sessions that have one."""
    values = {s: [*given[:-1], given[-1] + PLAN[s]["reward"]] for s, (_, given) in sent.items()}
    if rule == "return_to_go":
        values = {s: [sum(discount ** (j - k) * v[j] for j in range(k, len(v))) for k in range(len(v))]
                  for s, v in values.items()}
    out = {}
    for s, v in values.items():
        row = []
        for k, value in enumerate(v):
            peers = [other[k] for other in values.values() if k < len(other)]
            std = unbiased_std(peers)
            row.append((value - sum(peers) / len(peers)) / ((std + EPS) or 1.0))
        out[s] = row
    return out


def per_token(ends: list[int], per_turn: list[float]) -> list[float]:
    out: list[float] = []
    for end, value in zip(ends, per_turn, strict=True):
        out += [value] * (end - len(out))
    return out


def test_turn_rewards_become_per_token_advantages_by_the_configured_rule(settings, codec, proxy, tmp_path):
    assembler = AssemblerProcess(settings, tmp_path).start()
    try:
        sent = {s: asyncio.run(run_session(proxy, s, plan)) for s, plan in PLAN.items()}
        records = wait_for(settings, codec, "trajectories", len(PLAN), 120, assembler)
    finally:
        assembler.stop()
    mine = {r.session_id: r for r in records if r.session_id in PLAN}
    assert set(mine) == set(PLAN)
    for session_id, (ends, given) in sent.items():  # the assembler's turns are the agent's
        assert (mine[session_id].turn_ends, mine[session_id].turn_rewards) == (ends, given)
    for rule, discount in (("return_to_go", 0.5), ("per_turn_group", 1.0)):
        check_rule(mine, sent, rule, discount)


def check_rule(mine: dict, sent: dict, rule: str, discount: float) -> None:
    """The trainer's path from the records to per-token advantages, against the hand computation."""
    options = TrainerOptions(group_size=len(PLAN), batch_threshold=1, advantages=rule, discount=discount)
    builder = BatchBuilder(options.batch_config())
    for record in mine.values():
        builder.add(sample_from_record(record), 0)
    (group,) = builder.poll(0, 0).batch
    _, advantages = step_advantages([group], options.scale_by_std, AdvantageRule(rule), discount)
    assert advantages is not None
    expected = expected_per_turn(sent, rule, discount)
    for sample, got in zip(group.samples, advantages, strict=True):
        ends = sent[sample.trajectory_id.split("/")[0]][0]
        assert got == pytest.approx(per_token(ends, expected[sample.trajectory_id.split("/")[0]]), abs=1e-6)
    batch = collate(group.samples)  # what the loss reads: each token its own turn's advantage
    laid_out = batch.per_position([torch.tensor(a) for a in advantages])
    for row, sample in enumerate(group.samples):
        assert laid_out[row, : len(sample.tokens)].tolist() == pytest.approx(advantages[row], abs=1e-6)

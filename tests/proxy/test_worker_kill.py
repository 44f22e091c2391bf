"""Two proxy worker processes on one port (`proxy.workers: 2`); one is killed -9 while calls run through it.

Agents retry a failed call under its `Idempotency-Key` and land on the surviving worker. The assembler (a
real worker process) then gives every session exactly one trajectory, bit for bit what the agent saw: a
call the dead worker recorded before dying is a copy the assembler drops, never a second turn, and the
survivor records whole prompts for sessions whose earlier records it does not hold (prompt deltas).
"""

from __future__ import annotations

import asyncio
import os
import signal
from pathlib import Path

import aiohttp
import pytest

from seamlessflow.kafka.admin import ensure_topics
from seamlessflow.kafka.io import read_messages
from seamlessflow.loadtest.stub_engine import StubBehaviour, StubEngine
from seamlessflow.messages import TokenIO
from seamlessflow.testing.assembler_harness import AssemblerProcess, read_trajectories, wait_for
from seamlessflow.testing.proxy_workers import start_workers, wait_ready
from seamlessflow.topics import Topics

ROOT = Path(__file__).resolve().parents[2]
AUTH = {"Authorization": "Bearer key-alpha"}
SESSIONS, TURNS = 16, 6

pytestmark = pytest.mark.timeout(300)


class Agents:
    """Token-level agents that retry a failed call (same Idempotency-Key) until one is answered."""

    def __init__(self, url: str):
        self.url, self.retries, self.answered = url, 0, 0

    async def post(self, http, path: str, body: dict, key: str) -> dict:
        for _ in range(200):
            try:
                async with http.post(f"{self.url}{path}", json=body, headers={**AUTH, "Idempotency-Key": key}) as r:
                    if r.status == 200:
                        return await r.json()
                    assert r.status >= 500, await r.text()  # a 4xx is a bug, not a fault to ride out
            except (TimeoutError, aiohttp.ClientError):
                pass
            self.retries += 1
            await asyncio.sleep(0.05)
        raise AssertionError(f"{path}: never answered")

    async def session(self, http, sid: str, index: int) -> list[int]:
        prompt = [index + 1] * 40
        for turn in range(TURNS):
            body = {"model": "stub-model", "prompt": prompt, "max_tokens": 6, "return_token_ids": True}
            reply = await self.post(http, f"/sessions/{sid}/v1/completions", body, f"{sid}-{turn}")
            self.answered += 1
            completion = reply["choices"][0]["token_ids"]
            if turn == TURNS - 1:
                await self.post(http, f"/sessions/{sid}/end", {"reward": 1.0}, f"{sid}-end")
                return prompt + completion
            prompt = prompt + completion + [200 + turn] * 4
        raise AssertionError("unreachable")


async def test_killing_one_of_two_workers_loses_and_duplicates_nothing(settings, codec, tmp_path):
    ensure_topics(settings)
    engine = await StubEngine(StubBehaviour(token_delay_s=0.01)).start()
    procs, url = start_workers(settings, engine.url, tmp_path)
    assembler = AssemblerProcess(settings, tmp_path).start()
    try:
        await wait_ready(url, procs)
        agents = Agents(url)
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as http:  # a socket per call
            runs = asyncio.gather(*(agents.session(http, f"k{i}", i) for i in range(SESSIONS)))
            while agents.answered < SESSIONS * TURNS // 3:
                await asyncio.sleep(0.02)
            os.kill(procs[0].pid, signal.SIGKILL)
            seen = dict(zip((f"k{i}" for i in range(SESSIONS)), await runs, strict=True))
        trajectories = await asyncio.to_thread(wait_for, settings, codec, "trajectories", SESSIONS, 120, assembler)
        events = await asyncio.to_thread(read_messages, settings, Topics(settings).session_events, codec)
    finally:
        for proc in procs:
            proc.kill()
            proc.wait(30)
        assembler.stop()
        await engine.stop()
    assert agents.retries > 0  # the kill cut calls in flight
    assert sorted(t.session_id for t in trajectories) == sorted(seen)  # one trajectory per session, no more
    for trajectory in trajectories:
        assert list(trajectory.tokens) == seen[trajectory.session_id], trajectory.session_id
        assert sum(trajectory.loss_mask) == 6 * TURNS  # each turn's completion once: no call counted twice
    calls = [e for e in events if isinstance(e, TokenIO)]
    assert len({e.event_id for e in calls}) >= SESSIONS * TURNS
    assert any(e.prompt_base_id is not None for e in calls)  # deltas in use on both sides of the kill
    assert len(read_trajectories(settings, codec)) == SESSIONS

"""Environment steps run in child processes: a slow, hung or crashing step stalls neither the agent's event
loop nor the other sessions of its pool, and turns into an exception with the reason."""

from __future__ import annotations

import asyncio
import time

import pytest

from seamlessflow.agents.environment import Environment, EnvironmentCrashed, EnvironmentStepError, EnvironmentTimeout
from seamlessflow.testing import environment_steps as envs


@pytest.fixture(scope="module")
def env():
    environment = Environment(timeout_s=10.0, memory_mb=512, preload=("seamlessflow.testing.environment_steps",))
    environment.step(envs.add, 0, 0)  # the fork server, started before any step is timed
    yield environment
    environment.close()


def test_a_step_returns_its_value_or_raises_with_the_reason(env):
    assert env.step(envs.add, 2, 3) == 5
    with pytest.raises(EnvironmentStepError, match="ValueError: the simulator rejected the action"):
        env.step(envs.broken)
    with pytest.raises(EnvironmentCrashed, match="exit code 7"):
        env.step(envs.crash)
    started = time.monotonic()
    with pytest.raises(EnvironmentTimeout):
        env.step(envs.sleep_then, 3600, "never", timeout_s=1.0)
    assert time.monotonic() - started < 5.0  # killed at its deadline, not waited for


PATIENT_S = 120.0  # steps that must not time out: on a loaded CI run a crash took past the fixture's 10 s


async def _ticker(gaps: list[float], stop: asyncio.Event) -> None:
    """How long the event loop was away: the longest gap between 20 ms sleeps."""
    last = time.monotonic()
    while not stop.is_set():
        await asyncio.sleep(0.02)
        now = time.monotonic()
        gaps.append(now - last)
        last = now


def test_a_slow_or_crashing_step_does_not_block_the_event_loop_or_the_other_sessions(env, tmp_path):
    """The slow step runs until the others are done and the test lets it go: no deadline to race on a loaded
    machine (a 4 s and then a 20 s deadline both lost to seven forks on a loaded CI run)."""
    finished: list[str] = []
    release = tmp_path / "release"

    async def session(name: str, step) -> None:
        try:
            await step()
        except EnvironmentStepError as exc:
            finished.append(f"{name}:{type(exc).__name__}")
            return
        finished.append(name)

    async def main(inline_slow: bool) -> list[float]:
        gaps: list[float] = []
        stop = asyncio.Event()
        ticker = asyncio.create_task(_ticker(gaps, stop))

        async def slow():
            if inline_slow:
                time.sleep(2.0)  # what a blocking tool call inside an async agent does
            else:
                assert await env.astep(envs.wait_for_file, str(release), "released", timeout_s=300) == "released"

        async def quick():
            for _ in range(3):
                assert await env.astep(envs.add, 1, 1, timeout_s=PATIENT_S) == 2

        slow_session = asyncio.create_task(session("slow", slow))
        await asyncio.gather(session("crash", lambda: env.astep(envs.crash, timeout_s=PATIENT_S)),
                             *(session(f"quick{i}", quick) for i in range(3)))
        assert inline_slow or not slow_session.done()  # the others finished while it was still running
        release.touch()
        await slow_session
        stop.set()
        await ticker
        return gaps

    gaps = asyncio.run(main(inline_slow=False))
    assert finished[-1] == "slow"
    assert sorted(finished[:-1]) == ["crash:EnvironmentCrashed", "quick0", "quick1", "quick2"]
    assert max(gaps) < 1.0, f"the event loop stalled {max(gaps):.2f} s"
    finished.clear()
    assert max(asyncio.run(main(inline_slow=True))) >= 1.9  # the measure sees a stall when there is one

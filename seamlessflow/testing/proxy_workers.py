"""Proxy worker processes on one port (`proxy.workers`), started as `services/proxy` starts them, for the tests
that kill one (tests/proxy/test_worker_kill.py, test_stored_responses_vllm.py)."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import aiohttp

from seamlessflow.config import Settings
from seamlessflow.ports import free_port

ROOT = Path(__file__).resolve().parents[2]


def start_workers(settings: Settings, engine_url: str, tmp_path: Path,
                  count: int = 2) -> tuple[list[subprocess.Popen], str]:
    port = free_port()
    config = settings.with_overrides(
        team_keys={"alpha": "key-alpha"},
        proxy={"port": port, "workers": count, "heartbeat_s": 1, "engines": [{"id": "stub", "url": engine_url}]},
    ).dump_yaml(tmp_path / "proxy.yaml")
    procs = []
    for i in range(count):
        with open(tmp_path / f"proxy-{i}.log", "ab") as log:
            procs.append(subprocess.Popen([sys.executable, "-m", "services.proxy", "--config", str(config),
                                           "--worker", str(i)], cwd=ROOT, stdout=log, stderr=log))
    return procs, f"http://127.0.0.1:{port}"


async def wait_ready(url: str, procs: list[subprocess.Popen]) -> None:
    async with aiohttp.ClientSession() as http:
        for _ in range(600):
            assert all(p.poll() is None for p in procs), "a proxy worker exited at start"
            try:
                async with http.get(f"{url}/healthz") as response:
                    if response.status == 200:
                        await asyncio.sleep(1.0)  # every worker bound, or the kernel sends all to the first
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("the proxy workers never answered")

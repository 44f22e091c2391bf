"""`bench_proxy.py --peers`: SeamlessFlow's proxy and the gateways people run, in front of one StubEngine, one table.

Each peer runs from a venv of its own under `.bench-peers/` (git-ignored), made on first use with the install
command printed (`--no-install` skips a peer whose venv is missing instead, saying so). Every gateway is one
process (its process tree is what the CPU column counts; SeamlessFlow's Kafka broker is not in it), measured
right after the direct run of the same level with `bench_proxy.run_level`'s load loop:

- **LiteLLM's proxy**, `litellm[proxy]==1.106.12`, master key, no database (the gateway many teams put in front
  of their engines). 1.106.12 is the newest whose `proxy` extra resolves from the registry here: 1.108.14 to
  1.110.2 pin `litellm-proxy-extras` / `litellm-proxy` releases the registry does not serve. It records nothing
  of a call's tokens (no database: no spend logs). It has the Responses API (bridged to the engine's chat).
- **Agent Lightning 1.0.2's server** (`agl-server`), with an API key; it needs Python 3.12 (found under pyenv
  or on PATH). One rollout per session, a `train`-mode route. It keeps each call's request and response (token
  ids, as it asks the engine for them) as an event in its process's memory, lost when it stops; it answers
  `stream: true` with 400 and has no Responses route.
- **AReaL's gateway is not included**: its data proxy builds the prompt itself with a Hugging Face tokenizer
  (`--tokenizer-path`, fetched from the hub, which is unreachable here) and calls SGLang's or vLLM's token-in
  completions route, reading `return_tokens_as_token_ids` logprobs (`token_id:N`), which the StubEngine does
  not speak; and `areal` 1.0.4 (Python < 3.13) installs torch >= 2.9.1, ray and a few GB of CUDA wheels
  beside it. It needs no GPU to install, but it cannot run here without a model's tokenizer and a real engine.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil
import yaml

from benchmarks import proxy_load as load

PEERS_DIR = Path(__file__).resolve().parents[1] / ".bench-peers"
RECORDS = {
    "seamlessflow": "token ids, logprobs, versions: Kafka, acked before the reply (durable)",
    "litellm": "nothing of the tokens (no database)",
    "agentlightning": "request + reply JSON with token ids: in memory (lost on exit)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--peers", action="store_true", help="one table: SeamlessFlow and the peer gateways")
    parser.add_argument("--gateways", default="seamlessflow,litellm,agentlightning", help="with --peers")
    parser.add_argument("--peers-dir", type=Path, default=PEERS_DIR, help="where the peers' venvs live")
    parser.add_argument("--no-install", action="store_true", help="skip a peer whose venv is missing")


@dataclass
class Peer:
    requirement: str
    entry: str  # the console script that starts it, in the venv's bin/
    python: Callable[[], str | None]  # the interpreter its venv is made with (None: not on this machine)


def python_312() -> str | None:
    """Agent Lightning 1.0 wants Python 3.12; this machine's image has it under pyenv, not as its python3."""
    candidates = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    candidates += [p for p in [shutil.which("python3.12")] if p]
    for candidate in candidates:
        if subprocess.run([candidate, "-V"], capture_output=True, check=False).returncode == 0:
            return candidate
    return None


PEERS = {
    "litellm": Peer("litellm[proxy]==1.106.12", "litellm", lambda: sys.executable),
    "agentlightning": Peer("agentlightning==1.0.2", "agl-server", python_312),
}


def ensure_venv(name: str, args: argparse.Namespace) -> Path | None:
    """The peer's venv (made and installed now if missing and allowed), or None with the reason printed."""
    peer, venv = PEERS[name], args.peers_dir / name
    if (venv / "bin" / peer.entry).exists():
        return venv
    python = peer.python()
    command = f"{python or 'python3.12'} -m venv {venv} && {venv}/bin/pip install '{peer.requirement}'"
    if args.no_install:
        print(f"skipped {name}: no venv at {venv} (--no-install); to make it: {command}")
        return None
    if python is None:
        print(f"skipped {name}: no Python 3.12 on this machine (pyenv or PATH); its install: {command}")
        return None
    print(f"installing {name}: {command}", flush=True)
    done = subprocess.run(command, shell=True, check=False)
    if done.returncode != 0:
        print(f"skipped {name}: its install failed ({done.returncode})")
        return None
    return venv


def tree_cpu(roots: list[subprocess.Popen], seen: dict[int, float]) -> float:
    """CPU seconds of the processes' trees so far; `seen` keeps each pid's last reading, so a child that exited
    still counts."""
    for root in roots:
        try:
            tree = [psutil.Process(root.pid)]
            tree += tree[0].children(recursive=True)
        except psutil.NoSuchProcess:
            continue
        for proc in tree:
            try:
                times = proc.cpu_times()
            except psutil.NoSuchProcess:
                continue
            seen[proc.pid] = times.user + times.system
    return sum(seen.values())


@dataclass
class Gateway:
    name: str
    procs: list[subprocess.Popen]
    url_for: Callable[[str, int, str], str]  # (label of the level, session, route's path) -> URL
    key: str
    routes: tuple[str, ...]
    store: list[subprocess.Popen] = field(default_factory=list)  # where it records calls, when not in itself
    seen: dict[int, float] = field(default_factory=dict)
    store_seen: dict[int, float] = field(default_factory=dict)

    def cpu(self) -> float:
        return tree_cpu(self.procs, self.seen)

    def store_cpu(self) -> float:
        return tree_cpu(self.store, self.store_seen)


def post_json(url: str, body: Any, key: str) -> None:
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {key}"},
    )
    with urllib.request.urlopen(request, timeout=30):
        pass


def start_seamlessflow(client: Any, engine: str, work: Path, venv: Path | None, sessions: int) -> Gateway:
    procs, url = load.start_proxies(client, engine, 1, work)
    return Gateway(
        "seamlessflow", procs, lambda label, i, path: f"{url}/sessions/{label}-{i}{path}", load.KEY,
        ("chat", "responses", "messages"),
    )


def start_litellm(client: Any, engine: str, work: Path, venv: Path | None, sessions: int) -> Gateway:
    assert venv is not None
    key, port = "sk-" + load.KEY, load.free_port()
    config = {
        "model_list": [
            {"model_name": "stub-model",
             "litellm_params": {"model": "hosted_vllm/stub-model", "api_base": engine + "/v1", "api_key": "none"}}
        ],
        "general_settings": {"master_key": key},
    }
    path = work / "litellm.yaml"
    path.write_text(yaml.safe_dump(config))
    argv = [str(venv / "bin" / "litellm"), "--config", str(path), "--host", "127.0.0.1", "--port", str(port),
            "--num_workers", "1"]
    env = {"LITELLM_LOCAL_MODEL_COST_MAP": "True", "LITELLM_TELEMETRY": "False"}  # no fetch from outside
    procs = [load.start(argv, work / "litellm.log", env=env, cwd=work)]
    url = f"http://127.0.0.1:{port}"
    load.wait_http(url + "/health/liveliness", timeout_s=180)
    return Gateway("litellm", procs, lambda label, i, path: url + path, key, ("chat", "responses"))


def start_agentlightning(client: Any, engine: str, work: Path, venv: Path | None, sessions: int) -> Gateway:
    assert venv is not None
    port = load.free_port()
    argv = [str(venv / "bin" / "agl-server"), "host=127.0.0.1", f"port={port}", f"key={load.KEY}",
            "default_proxy.model_name=stub-model", f"hydra.run.dir={work / 'agl'}", "hydra.output_subdir=null"]
    procs = [load.start(argv, work / "agl.log", cwd=work)]
    url = f"http://127.0.0.1:{port}"
    load.wait_http(url + "/healthz", timeout_s=120)
    post_json(url + "/api/models", [{"model": "stub-model", "endpoint": engine + "/v1"}], load.KEY)
    post_json(url + "/api/rollouts", [{"input": {}, "rollout_id": f"s{i}"} for i in range(sessions)], load.KEY)
    return Gateway(
        "agentlightning", procs,
        lambda label, i, path: f"{url}/proxy/rollout/s{i}/attempt/{label}/mode/train/openai{path}", load.KEY,
        ("chat",),
    )


STARTERS = {"seamlessflow": start_seamlessflow, "litellm": start_litellm, "agentlightning": start_agentlightning}


def probe(gateway: Gateway, label: str, route: str, tokens: int, stream: bool) -> str | None:
    """None when one call goes through, else what the gateway answered."""
    path, body = load.ROUTES[route]
    request = urllib.request.Request(
        gateway.url_for(label, 0, path), data=json.dumps(body(tokens, stream)).encode(), method="POST",
        headers={"Content-Type": "application/json", "Authorization": f"Bearer {gateway.key}"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            response.read()
            return None
    except urllib.error.HTTPError as exc:
        return f"{exc.code} {exc.read()[:80].decode(errors='replace')}"


def uptime() -> None:
    print("uptime:", subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip(), flush=True)


HEADER = (
    "| mode | sessions | gateway | route | direct p50 | added p50 | added p99 | added TTFT p50 | ÷ direct "
    "| CPU per call | refused | records of a call |"
)


def run(args: argparse.Namespace, client: Any, engine: str, work: Path, broker: list[subprocess.Popen]) -> None:
    """Starts every gateway asked for (skipping those that cannot run here), then per mode and level: direct,
    then each gateway and route in turn, one table row each."""
    levels = [int(x) for x in args.levels.split(",")]
    gateways: list[Gateway] = []
    try:
        for name in args.gateways.split(","):
            venv = ensure_venv(name, args) if name in PEERS else None
            if name in PEERS and venv is None:
                continue
            gateways.append(STARTERS[name](client, engine, work, venv, max(levels)))
            if name == "seamlessflow":
                gateways[-1].store = broker  # its Kafka broker: priced beside it, not in its column
        uptime()
        print(HEADER)
        print("| --- " * HEADER.count(" | ") + "| --- |")
        for mode in args.modes.split(","):
            for level in levels:
                measure_level(args, engine, gateways, mode, level)
        uptime()
    finally:
        for gateway in gateways:
            load.stop(gateway.procs)


def measure_level(args: argparse.Namespace, engine: str, gateways: list[Gateway], mode: str, level: int) -> None:
    stream = mode == "stream"
    first_direct: list[float] = []
    direct, direct_rps, _ = asyncio.run(
        load.run_level(lambda i: engine + "/v1/chat/completions", level, args.seconds, args.tokens, stream,
                        first=first_direct if stream else None)
    )
    d50, d99 = load.pct(direct, 0.5), load.pct(direct, 0.99)
    ttft_direct = load.pct(first_direct, 0.5) if first_direct else None
    cell = f"| {mode} | {level} |"
    print(f"{cell} direct | chat | {d50:.1f} ms | | | {'' if ttft_direct is None else f'{ttft_direct:.1f} ms'} "
          f"| {direct_rps:.0f} calls/s | | | |", flush=True)
    for gateway in gateways:
        for route in (r for r in args.routes.split(",") if r in gateway.routes):
            label = f"{mode}-{level}-{route}-{time.monotonic_ns()}"
            refused = probe(gateway, label, route, args.tokens, stream)
            if refused is not None:
                print(f"{cell} {gateway.name} | {route} | refuses: {refused} |", flush=True)
                continue
            path = load.ROUTES[route][0]
            first: list[float] = []
            failures: list[int] = []
            stores: list[float] = []  # its store's CPU, read with the gateway's at both ends of the window

            def cpu(gateway: Gateway = gateway, stores: list[float] = stores) -> float:
                stores.append(gateway.store_cpu())
                return gateway.cpu()

            lat, rps, cpu_s = asyncio.run(
                load.run_level(
                    lambda i, label=label, path=path, gateway=gateway: gateway.url_for(label, i, path),
                    level, args.seconds, args.tokens, stream, cpu, route,
                    first if stream else None, failures, gateway.key,
                )
            )
            if not lat:
                print(f"{cell} {gateway.name} | {route} | no call finished ({len(failures)} refused) |", flush=True)
                continue
            ttft = f"{load.pct(first, 0.5) - ttft_direct:.1f} ms" if first and ttft_direct is not None else ""
            print(
                f"{cell} {gateway.name} | {route} | | {load.pct(lat, 0.5) - d50:.1f} ms "
                f"| {load.pct(lat, 0.99) - d99:.1f} ms | {ttft} | {rps / direct_rps:.3f} "
                f"| {cpu_s / len(lat) * 1000:.2f} ms | {len(failures)} | {RECORDS[gateway.name]}"
                + (f"; broker {(stores[-1] - stores[0]) / len(lat) * 1000:.2f} ms CPU a call" if gateway.store else "")
                + " |",
                flush=True,
            )

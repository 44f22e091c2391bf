"""The chaos run's own agents: multi-turn sessions through the proxy, and a ledger of what was acknowledged.

Why its own agents rather than only the stack's agent workers: the audit needs to know, from outside the
services, which calls the proxy acknowledged. Each session sends token-id prompts to `/v1/completions`
(so turns extend each other exactly; some turns rewrite history and fork, some ask for n=2), retries a
failed call with the same `Idempotency-Key` (the proxy then records the same call id: a retry is
recognisable downstream), and ends with a reward. Every 200 is appended to the ledger (JSON lines,
flushed at once) before the next request, with the prompt ids sent and the completion ids received: a call
in the ledger is one the proxy promised to have recorded, and the audit looks for exactly those tokens.

Every `stored_every`-th session also keeps a short chain of stored Responses (`POST /v1/responses`, `store:
true`, each after the first continuing the previous one by `previous_response_id`) in the same session: each
acknowledged response goes to the ledger with its id, team and output items, which the run reads back through
the proxy once every fault is over (`stored.py`): state the proxy promised to keep across its kills.
"""

from __future__ import annotations

import asyncio
import json
import random
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp

from seamlessflow.chaos.config import ChaosConfig


@dataclass
class DriverStats:
    sessions_started: int = 0
    sessions_ended: int = 0
    sessions_given_up: int = 0
    calls_acknowledged: int = 0
    stored_acknowledged: int = 0
    retries: int = 0
    errors: dict[str, int] = field(default_factory=dict)


class Driver:
    """Runs sessions on a background thread until `stop()`; then finishes the sessions in flight.

    `proxy_url`: http://host:port (no /v1); `team`: the team `api_key` belongs to (written with each stored
    response); `ledger`: the JSON-lines file every acknowledged call is appended to."""

    def __init__(self, proxy_url: str, api_key: str, ledger: Path, options: ChaosConfig | None = None,
                 team: str = "default"):
        self.proxy_url, self.api_key, self.team = proxy_url, api_key, team
        self.options = options or ChaosConfig()
        self.stats = DriverStats()
        self._rng = random.Random(self.options.seed)
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._ledger = open(ledger, "a", buffering=1)
        self._thread = threading.Thread(target=lambda: asyncio.run(self._main()), name="chaos-driver", daemon=True)

    def start(self) -> Driver:
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 120.0) -> None:
        self._stop.set()
        self._thread.join(timeout_s)
        self._ledger.close()

    # -- sessions ---------------------------------------------------------------------------------------

    async def _main(self) -> None:
        timeout = aiohttp.ClientTimeout(total=60, connect=5)
        async with aiohttp.ClientSession(timeout=timeout, connector=aiohttp.TCPConnector(limit=0)) as http:
            await asyncio.gather(*(self._worker(http, i) for i in range(self.options.concurrency)))

    async def _worker(self, http: aiohttp.ClientSession, index: int) -> None:
        while not self._stop.is_set():
            group = f"g-{uuid.uuid4().hex[:12]}"
            for _ in range(self.options.group_size):
                await self._session(http, group)

    async def _session(self, http: aiohttp.ClientSession, group: str) -> None:
        o, rng = self.options, self._rng
        session = f"chaos-{uuid.uuid4().hex}"
        self.stats.sessions_started += 1
        stores = o.stored_every > 0 and (self.stats.sessions_started - 1) % o.stored_every == 0  # the first, every k-th
        history: list[int] = [rng.randrange(1, o.vocab) for _ in range(rng.randint(2, 6))]
        status = "done"
        for _turn in range(rng.randint(1, o.max_turns)):
            n = 2 if rng.random() < 0.15 else 1
            body = {"model": "any", "prompt": history, "max_tokens": o.max_tokens, "n": n, "return_token_ids": True}
            reply = await self._post(http, f"/sessions/{session}/v1/completions", body)
            if reply is None:
                status = "failed"
                break
            choices = sorted(reply["choices"], key=lambda c: c["index"])
            self._record(
                {"session": session, "prompt": history, "completions": [c.get("token_ids") or [] for c in choices]}
            )
            self.stats.calls_acknowledged += 1
            completion = list(choices[0].get("token_ids") or [])
            if rng.random() < 0.2 and len(history) > 2:  # rewrite history: cut it and diverge (a fork)
                history = history[: rng.randrange(1, len(history))]
            else:
                history = history + completion
            history += [rng.randrange(1, o.vocab) for _ in range(rng.randint(1, 3))]
        if status == "done" and stores and not await self._stored_chain(http, session):
            status = "failed"
        end = {"reward": float(rng.random() < 0.5), "status": status, "group_id": group, "task_id": group}
        if await self._post(http, f"/sessions/{session}/end", end) is None:
            self.stats.sessions_given_up += 1
            return
        self._record({"end": session})
        self.stats.sessions_ended += 1

    async def _stored_chain(self, http: aiohttp.ClientSession, session: str) -> bool:
        """`stored_chain` stored responses in `session`, each continuing the one acknowledged before it; False when
        one is not acknowledged (the chain stops there)."""
        previous = None
        for turn in range(self.options.stored_chain):
            body = {"model": "any", "input": f"chaos {session} turn {turn}", "store": True,
                    "max_output_tokens": self.options.max_tokens}
            if previous is not None:
                body["previous_response_id"] = previous
            reply = await self._post(http, f"/sessions/{session}/v1/responses", body)
            if reply is None:
                return False
            self._record({"stored": reply["id"], "team": self.team, "session": session,
                          "previous": previous, "output": reply["output"]})
            self.stats.stored_acknowledged += 1
            previous = reply["id"]
        return True

    async def _post(self, http: aiohttp.ClientSession, path: str, body: dict) -> dict | None:
        """POST with retries under one idempotency key; the reply's JSON on 200, None after `retry_for_s`."""
        headers = {"Authorization": f"Bearer {self.api_key}", "Idempotency-Key": uuid.uuid4().hex}
        deadline = time.monotonic() + self.options.retry_for_s
        delay = 0.2
        while True:
            try:
                async with http.post(self.proxy_url + path, json=body, headers=headers) as response:
                    if response.status == 200:
                        return await response.json()
                    reason = f"http {response.status}"
                    if 400 <= response.status < 500 and response.status not in (404, 408, 409, 429):
                        self._count(reason)
                        return None  # the request itself is wrong: retrying cannot help
            except (TimeoutError, aiohttp.ClientError) as exc:
                reason = type(exc).__name__
            self._count(reason)
            if time.monotonic() > deadline:
                return None
            self.stats.retries += 1
            await asyncio.sleep(delay)
            delay = min(delay * 2, 2.0)

    def _record(self, entry: dict) -> None:
        with self._lock:
            self._ledger.write(json.dumps({**entry, "t_ms": int(time.time() * 1000)}) + "\n")

    def _count(self, reason: str) -> None:
        self.stats.errors[reason] = self.stats.errors.get(reason, 0) + 1

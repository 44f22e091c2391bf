"""Stored Responses across kills: every response the proxy acknowledged with `store: true` must still be served,
unchanged, to its own team, and to no other team.

Why read back over HTTP, not from the responses topic: the promise is what a client gets back. A record on the
compacted topic that the proxy no longer serves (a restarted worker that cannot find it, a team check lost) is
lost to the client all the same, and the team rule lives in the proxy. So once the run is over (every fault
delivered and recovered from, the proxy still up) `read_stored` asks the proxy for each ledgered response with
its own team's key and with another team's (`OTHER_TEAM`, a team that makes no calls), and `check_stored`
judges the replies: pure, replies in, findings out, as the audit's other rules.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import aiohttp

from seamlessflow.chaos.adapters import Findings
from seamlessflow.config import Settings
from seamlessflow.teams import TeamKeys

OTHER_TEAM = "chaos-other"  # makes no calls: its key must read none of the run's stored responses
RETRY_STATUSES = (502, 503, 504)  # a proxy still catching up on the responses topic, or not yet listening


@dataclass(frozen=True)
class AckedResponse:
    """A stored response as its agent got it: its id, the team whose key made it, and its output items."""

    response_id: str
    team: str
    session_id: str
    output: str  # the reply's `output` items as `output_key` writes them
    previous_id: str | None = None
    t_ms: int = 0  # when the driver got the 200


@dataclass(frozen=True)
class Reply:
    status: int | None  # None: no answer from the proxy within the wait
    body: Any = None  # the JSON body of a 200


@dataclass(frozen=True)
class ReadBack:
    """One acknowledged response and what `GET /v1/responses/{id}` answered with each team's key."""

    acked: AckedResponse
    own: Reply
    other: Reply


def output_key(output: Any) -> str:
    """Output items in one canonical text, so the acknowledged and the read-back reply compare as equal or not."""
    return json.dumps(output, sort_keys=True)


def acked_response(entry: dict) -> AckedResponse:
    """A ledger line the driver wrote for a stored response (`{"stored": id, ...}`)."""
    return AckedResponse(entry["stored"], entry["team"], entry["session"], output_key(entry["output"]),
                         entry.get("previous"), entry.get("t_ms", 0))


def chaos_keys(settings: Settings) -> dict[str, str]:
    """The run's team's key (the driver's) and `OTHER_TEAM`'s, each made once and kept in the data dir; the proxy
    re-reads its key file when it changes, so a running stack knows both."""
    keys = TeamKeys.from_settings(settings)
    return {team: keys.ensure_default(team) or "" for team in (settings.team, OTHER_TEAM)}


def check_stored(reads: Sequence[ReadBack], report: Findings, last_proxy_kill_ms: int = 0) -> None:
    """Own team: a 200 with the same id and output, else lost (or changed). Another team: a 404, the same
    answer as for an unknown id; anything else tells it something of a response that is not its own."""
    for read in reads:
        acked = read.acked
        report.counts["stored responses acknowledged"] += 1
        if acked.t_ms < last_proxy_kill_ms:
            report.counts["stored responses acknowledged before the last proxy kill"] += 1
        _check_own(acked, read.own, report)
        if read.other.status == 404:
            report.counts["stored responses refused to another team (404)"] += 1
        else:
            report.fail("stored response served to another team",
                        f"{acked.response_id} of team {acked.team}: {_said(read.other)} to another team's key")


def _check_own(acked: AckedResponse, reply: Reply, report: Findings) -> None:
    what = f"{acked.response_id} of team {acked.team} (session {acked.session_id})"
    if reply.status != 200:
        report.fail("stored response lost", f"{what}: {_said(reply)} to its own team's key")
    elif not isinstance(reply.body, dict) or reply.body.get("id") != acked.response_id:
        report.fail("stored response differs", f"{what}: read back as {str(reply.body)[:120]}")
    elif output_key(reply.body.get("output")) != acked.output:
        report.fail("stored response differs", f"{what}: output {output_key(reply.body.get('output'))[:200]}, "
                                               f"acknowledged {acked.output[:200]}")
    else:
        report.counts["stored responses read back intact"] += 1


def _said(reply: Reply) -> str:
    return "no answer" if reply.status is None else f"http {reply.status}"


def read_stored(proxy_url: str, keys: Mapping[str, str], acked: Sequence[AckedResponse],
                wait_s: float = 60.0) -> list[ReadBack]:
    """`read_back` from a thread with no event loop (the chaos run's)."""
    return asyncio.run(read_back(proxy_url, keys, acked, wait_s))


async def read_back(proxy_url: str, keys: Mapping[str, str], acked: Sequence[AckedResponse],
                    wait_s: float = 60.0, in_flight: int = 8) -> list[ReadBack]:
    """Each response read with its team's key and with the first other team's in `keys`, `in_flight` at a time.
    A 5xx or no connection is retried until one deadline for all (a proxy that never answers costs `wait_s` once,
    not per response)."""
    deadline = time.monotonic() + wait_s
    slots = asyncio.Semaphore(in_flight)
    timeout = aiohttp.ClientTimeout(total=10, connect=5)

    async def read(item: AckedResponse, http: aiohttp.ClientSession) -> ReadBack:
        url = f"{proxy_url}/v1/responses/{item.response_id}"
        other = next(team for team in sorted(keys) if team != item.team)
        async with slots:
            return ReadBack(item, await _get(http, url, keys[item.team], deadline),
                            await _get(http, url, keys[other], deadline))

    async with aiohttp.ClientSession(timeout=timeout) as http:
        return list(await asyncio.gather(*(read(item, http) for item in acked)))


async def _get(http: aiohttp.ClientSession, url: str, key: str, deadline: float) -> Reply:
    reply = Reply(None)
    while True:
        try:
            async with http.get(url, headers={"Authorization": f"Bearer {key}"}) as response:
                body = await response.json(content_type=None) if response.status == 200 else None
                reply = Reply(response.status, body)
        except (TimeoutError, aiohttp.ClientError, ValueError):
            pass
        if (reply.status is not None and reply.status not in RETRY_STATUSES) or time.monotonic() > deadline:
            return reply
        await asyncio.sleep(0.5)

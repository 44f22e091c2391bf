"""The weight-update side of the engine fence: every proxy hears of an engine's new weights in time.

A token's recorded version is the version the proxy holds for its engine when it reads the token. So
whoever changes an engine's weights holds the engine at every proxy before pausing it (each proxy cuts the
engine's streams, keeping the tokens it has read, and stops routing to it) and releases it with the new
version before resuming it (the proxies label it, then route to it again). No token of the new weights can
then be read under the old label, nor one of the old weights under the new; see
`seamlessflow.proxy.engine_fence` for the proxy's side and why that is exact.

The proxies are found in their heartbeats (a proxy's `ResourceStatus.engine_url` is its fence URL). A proxy
that cannot be reached at all is skipped: it is down, so it reads nothing from the engine, and when it comes
back it learns versions from heartbeats (which lag, never lead). A proxy that answers with an error, or not
in time, fails the update of that engine (`FenceError`: it would otherwise record tokens with a wrong version).

Two paths change an engine's weights and fence it: the trainer's transfer group (`broadcast`) and the rollout
worker (files: an in-place reload, or a restart on the new directory; and every engine start, whose first
tokens are of the files' version whatever a proxy last knew). A team's LoRA adapter has versions of its own: the
rollout worker loads one into its running engine (`seamlessflow.rollout.adapters`) under the same fence, and its
release names the adapter (`adapter=`): the proxies label that adapter's calls with it, the base's calls keep theirs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from typing import Protocol

import httpx

from seamlessflow.core.resources import ResourceKind
from seamlessflow.messages import ResourceStatus

log = logging.getLogger(__name__)

FENCE_TIMEOUT_S = 60.0  # a hold answers once the engine's cut streams stopped reading (the proxy bounds it at 30 s)


class FenceError(RuntimeError):
    """A live proxy did not confirm a hold or a release."""


def proxy_fence_url(status: ResourceStatus) -> str | None:
    """Where a proxy's heartbeat says a weight update holds and releases engines (None: not a proxy, or one
    that predates the fence). A proxy marked failed keeps its URL: one that is down is skipped when told."""
    if status.kind != ResourceKind.PROXY:
        return None
    return status.engine_url or None


class VersionFence(Protocol):
    def hold(self, engine_url: str) -> None: ...

    def release(self, engine_url: str, version: int, adapter: str | None = None) -> None:
        """The engine holds `version` now: of the base weights, or of the LoRA adapter `adapter`."""
        ...


class NoFence:
    """No proxy to tell (a transfer without a proxy in front of the engines, e.g. a benchmark)."""

    def hold(self, engine_url: str) -> None:
        return None

    def release(self, engine_url: str, version: int, adapter: str | None = None) -> None:
        return None


class ProxyFence:
    """Holds and releases an engine at every proxy `proxy_urls()` names now (their fence URLs)."""

    def __init__(self, proxy_urls: Callable[[], Iterable[str]], timeout_s: float = FENCE_TIMEOUT_S):
        self.proxy_urls = proxy_urls
        self.http = httpx.Client(timeout=timeout_s)

    def hold(self, engine_url: str) -> None:
        self._tell("/engines/hold", {"url": engine_url})

    def release(self, engine_url: str, version: int, adapter: str | None = None) -> None:
        body: dict[str, object] = {"url": engine_url, "version": version}
        if adapter is not None:
            body["adapter"] = adapter
        self._tell("/engines/release", body)

    def _tell(self, path: str, body: dict) -> None:
        for proxy in sorted(set(self.proxy_urls())):
            try:
                self.http.post(proxy.rstrip("/") + path, json=body).raise_for_status()
            except httpx.ConnectError as exc:
                log.warning("proxy %s not reachable for %s of %s (down: it reads nothing): %s", proxy, path,
                            body["url"], exc)
            except httpx.HTTPError as exc:
                raise FenceError(f"proxy {proxy} did not confirm {path} of {body['url']}: {exc}") from exc

    def close(self) -> None:
        self.http.close()

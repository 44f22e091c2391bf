"""The settings as services placed on a Ray cluster see them: they run on other hosts than the `up` that
starts them, so what `up` leaves on loopback or in its own data directory must reach them another way.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from seamlessflow.config import Settings
from seamlessflow.stack.options import ClusterOptions
from seamlessflow.teams import TeamKeys


def for_the_cluster(settings: Settings, driver_ip: str) -> Settings:
    """What changes when the services run on other hosts: the embedded broker listens on the driver's node
    address (unless a `broker_host` was given), the default team's key travels in the config (each node's
    data directory is its own, so the key file is not there), and servers left on loopback listen on every
    address (`_reachable`)."""
    if settings.embedded and settings.broker_host == "127.0.0.1":
        settings = settings.with_overrides(broker_host=driver_ip)
    key = TeamKeys.from_settings(settings).ensure_default(settings.team)
    settings = settings.with_overrides(team_keys={settings.team: key, **settings.team_keys})
    return _reachable(settings, driver_ip)


def _reachable(settings: Settings, driver_ip: str) -> Settings:
    """Engines and proxies on loopback listen on every address and announce their node's (the placement tells
    each service its node: `ports.reachable_host`); agents and the eval find a proxy left on the driver's node
    (where `RayPlacement` puts it unless told otherwise) at the driver's address."""
    overrides: dict[str, dict] = {}
    for section in ("rollout", "proxy"):
        if _loopback_host(str(settings.section(section).get("host", "127.0.0.1"))):
            overrides[section] = {"host": "0.0.0.0"}
    proxy = ClusterOptions.from_settings(settings).entry("proxy", "proxy")
    proxy_elsewhere = proxy.node or proxy.custom  # placed by the user's request, not on the driver's node
    for section in ("agents", "eval"):
        url = settings.section(section).get("proxy_url")
        if url and not proxy_elsewhere and _loopback_host(urlsplit(url).hostname or ""):
            overrides[section] = {"proxy_url": url.replace(urlsplit(url).hostname or "", driver_ip, 1)}
    return settings.with_overrides(**overrides) if overrides else settings


def _loopback_host(host: str) -> bool:
    return host in ("127.0.0.1", "localhost")


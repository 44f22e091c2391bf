"""Free local TCP ports, for anything that listens on 127.0.0.1 (broker nodes, vLLM engines, test servers).

Why its own module: the broker, the rollout engine launcher and the tests all need one, and none of them
should import another's package for it.
"""

from __future__ import annotations

import os
import random
import socket
from pathlib import Path

# Set by a placement that puts services on other hosts (Ray's `ServiceHost`): the address of this service's
# node that the other nodes reach. Unset on the one-machine default.
NODE_ADDRESS_ENV = "SEAMLESSFLOW_NODE_ADDRESS"
WILDCARDS = ("0.0.0.0", "::", "")


def interface_of(address: str) -> str | None:
    """The network interface holding `address` on this host, or None."""
    import psutil

    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == address for a in addresses):
            return name
    return None


def reachable_host(bind_host: str) -> str:
    """The address to hand out for a server bound to `bind_host`: itself, or for a wildcard bind this node's
    address as its placement gave it (loopback on one machine). Why: a URL announced on a topic (an engine's,
    a proxy's fence, the trainer's version files) is used from other hosts, and `0.0.0.0` reaches nothing."""
    if bind_host not in WILDCARDS:
        return bind_host
    return os.environ.get(NODE_ADDRESS_ENV) or "127.0.0.1"


def free_port() -> int:
    """A port the OS says is free now (another process may still take it before it is bound)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def free_port_block(count: int, low: int = 20000, high: int | None = None) -> int:
    """The first of `count` consecutive ports that are free now (brokers and controllers take a block), by default
    above Ray's worker ports (10002-19999) and below the OS's ephemeral range (`high`: its first port). Why: the
    kernel hands ephemeral ports to every outgoing connection, so a port found free there may be some client's by
    the time the server binds it (a service's /metrics then never came up in a CI run: `test_dashboard_up`)."""
    high = high if high is not None else ephemeral_range()[0]
    for _ in range(200):
        base = random.randrange(low, high - count)
        if all(_bindable(base + i) for i in range(count)):
            return base
    raise RuntimeError(f"no block of {count} free ports found")


def ephemeral_range(path: str = "/proc/sys/net/ipv4/ip_local_port_range") -> tuple[int, int]:
    """The ports the kernel picks for outgoing connections (Linux's default where it does not say)."""
    try:
        low, high = (int(part) for part in Path(path).read_text().split())
        return low, high
    except (OSError, ValueError):
        return 32768, 60999


def _bindable(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
            return True
        except OSError:
            return False

"""Runs the trajectory proxy until SIGTERM/SIGINT, then flushes its events and exits.

Reads the shared settings (Kafka, topic prefix, team keys, run) and the `proxy:` section (ProxyOptions).
Prints one line `proxy listening on http://HOST:PORT/v1` once it accepts requests.
"""

from __future__ import annotations

import argparse
import asyncio
import threading

import uvloop

from seamlessflow.config import Settings
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.service_main import run_until_signal


async def serve(settings: Settings, options: ProxyOptions, stop: threading.Event) -> None:
    service = await ProxyService(settings, options).start()
    print(f"proxy listening on {service.base_url}", flush=True)
    while not stop.is_set():  # the signal handler sets it between two turns of the loop
        await asyncio.sleep(0.2)
    await service.stop()


def run(settings: Settings, options: ProxyOptions, stop: threading.Event) -> None:
    """Serves on the event loop `proxy.event_loop` names (uvloop by default: less CPU per call)."""
    loop_factory = uvloop.new_event_loop if options.event_loop == "uvloop" else None
    with asyncio.Runner(loop_factory=loop_factory) as runner:
        runner.run(serve(settings, options, stop))


def proxy_options(settings: Settings, args: argparse.Namespace) -> ProxyOptions:
    """The `proxy:` section under this process's flags; worker INDEX of `proxy.workers` is resource <id>-INDEX."""
    overrides: dict[str, object] = {k: v for k, v in {"host": args.host, "port": args.port}.items() if v is not None}
    if args.worker is not None:
        overrides["id"] = f"{ProxyOptions.from_settings(settings).id}-{args.worker}"
    return ProxyOptions.from_settings(settings.with_overrides(proxy=overrides))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", help="overrides proxy.host")
    parser.add_argument("--port", type=int, help="overrides proxy.port")
    parser.add_argument(
        "--worker", type=int, help="this process is worker INDEX of proxy.workers (resource <id>-INDEX)"
    )


def main() -> None:
    run_until_signal(
        "services.proxy",
        lambda settings, stop, args: run(settings, proxy_options(settings, args), stop),
        add_arguments=add_arguments,
    )


if __name__ == "__main__":
    main()

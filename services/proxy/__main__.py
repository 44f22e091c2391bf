"""Runs the trajectory proxy until SIGTERM/SIGINT, then flushes its events and exits.

Reads the shared settings (Kafka, topic prefix, team keys, run) and the `proxy:` section (ProxyConfig).
Prints one line `proxy listening on http://HOST:PORT/v1` once it accepts requests.
"""

from __future__ import annotations

import asyncio
import logging
import signal

import click

from seamlessflow.config import Settings
from seamlessflow.proxy import ProxyConfig, ProxyService


async def serve(settings: Settings, config: ProxyConfig) -> None:
    service = await ProxyService(settings, config=config).start()
    print(f"proxy listening on {service.base_url}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await service.stop()


@click.command()
@click.option("--config", "config_path", type=click.Path(exists=True, dir_okay=False), default=None)
@click.option("--host", default=None, help="overrides proxy.host")
@click.option("--port", type=int, default=None, help="overrides proxy.port")
@click.option(
    "--worker", type=int, default=None, help="this process is worker INDEX of proxy.workers (resource <id>-INDEX)"
)
def main(config_path: str | None, host: str | None, port: int | None, worker: int | None) -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s proxy %(levelname)s %(name)s: %(message)s")
    settings = Settings.load(config_path)
    section = settings.section("proxy")
    section.update({k: v for k, v in {"host": host, "port": port}.items() if v is not None})
    if worker is not None:
        section["id"] = f"{section.get('id', 'proxy')}-{worker}"
    asyncio.run(serve(settings, ProxyConfig.model_validate(section)))


if __name__ == "__main__":
    main()

"""`seamlessflow dashboard`: the web dashboard against any running stack (the one `up` serves, or a
cluster named by --bootstrap-servers), until Ctrl-C."""

from __future__ import annotations

import signal
import threading

import click

from seamlessflow.cli.context import pass_settings
from seamlessflow.config import Settings


@click.command()
@click.option("--host", help="Address to listen on (default: dashboard.host, 127.0.0.1).")
@click.option("--port", type=int, help="Port (default: dashboard.port, 8300).")
@click.option("--tokenizer", type=click.Path(exists=True),
              help="tokenizer.json (or its dir) to show session text, not ids (default: the served model's).")
@pass_settings
def dashboard(settings: Settings, host: str | None, port: int | None, tokenizer: str | None) -> None:
    """Serve the web dashboard: resources, role timeline, reward/eval/throughput curves, sessions."""
    from seamlessflow.dashboard.app import run_dashboard

    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        run_dashboard(settings, stop, host, port, tokenizer, announce=click.echo)
    except KeyboardInterrupt:
        pass

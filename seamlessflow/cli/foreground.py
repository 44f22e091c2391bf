"""How `up` holds a stack in the foreground, whichever placement runs it: SIGTERM and Ctrl-C end in stopping
every service, and a start that cannot finish says why and exits 1."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Callable, Iterator

from rich.console import Console

from seamlessflow.stack.supervisor import StartupFailed


class _Stop(Exception):
    pass


def _raise_stop(*_: object) -> None:
    raise _Stop()


@contextlib.contextmanager
def held_until_stopped(console: Console, stop_all: Callable[[], None],
                       keep: Callable[[], bool] = lambda: False) -> Iterator[None]:
    """From here on a stop always ends in `stop_all`, unless `keep()` says the services outlive this process
    (a Ray-placed stack started with --detach)."""
    signal.signal(signal.SIGTERM, _raise_stop)
    try:
        yield
    except StartupFailed as exc:
        console.print(f"[red]startup failed:[/red] {exc}")
        raise SystemExit(1) from exc
    except (_Stop, KeyboardInterrupt):
        console.print("stopping ...")
    finally:
        if not keep():
            stop_all()

"""A stack for end-to-end tests: parts of the system run in the test's own process (threads) or beside it
(processes), stopped together in one order.

Why one place: an end-to-end test starts a proxy, agents, a scheduler, a trainer, an assembler and engine
processes, and each test wrote the same try/finally by hand, each in its own order. Here a part is
registered once it has started, and `close` (the end of a `with` block, or the `in_process_stack`
fixture's teardown) stops every part, in the order of `Stage`: callers first (agents, evaluators), then the
scheduler (it must still resume a proxy it paused for a weight update, or calls waiting at the proxy's gate
keep the proxy's stop from finishing), the trainer, the assembler, the proxy, and processes and fake
resources last. Within a stage, the part started last stops first.
"""

from __future__ import annotations

import asyncio
import enum
import subprocess
import sys
import threading
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, Protocol, TypeVar

from seamlessflow.agents import AgentWorker
from seamlessflow.config import Settings
from seamlessflow.proxy import ProxyOptions, ProxyService
from seamlessflow.teams import TeamKeys
from seamlessflow.testing.assembler_harness import AssemblerProcess
from seamlessflow.trainer.loop import Trainer
from seamlessflow.trainer.options import TrainerOptions

T = TypeVar("T")


class Stage(enum.IntEnum):
    """When a part stops at `close`, lowest first."""

    CALLERS = 0
    SCHEDULER = 1
    TRAINER = 2
    ASSEMBLER = 3
    PROXY = 4
    PROCESSES = 5


class StoppableService(Protocol):
    def run(self, stop: threading.Event) -> Any: ...


class ServiceThread:
    """A service's `run(stop)` in a thread (the scheduler, the eval service, the metrics sink), as its process
    entry point calls it."""

    def __init__(self, service: Any, join_s: float = 120.0):
        self.service, self.stop, self.join_s = service, threading.Event(), join_s
        self.thread = threading.Thread(target=service.run, args=(self.stop,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.stop.set()
        self.thread.join(self.join_s)
        assert not self.thread.is_alive(), f"{type(self.service).__name__} did not stop"


class AgentsThread:
    """An agent worker in a thread, once it joined its consumer group; `stop` returns its stats or the
    exception it stopped with."""

    def __init__(self, worker: AgentWorker):
        self.worker: AgentWorker = worker
        self.result: Any = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()
        assert worker.wait_assigned(60), "worker never joined its consumer group"

    def _run(self) -> None:
        try:
            self.result = self.worker.run()
        except Exception as exc:  # surfaced to the test through `result`
            self.result = exc

    def stop(self) -> Any:
        self.worker.stop()
        self.thread.join(60)
        return self.result


class ProxyThread:
    """The real proxy service on its own event loop in a thread."""

    def __init__(self, settings: Settings, options: ProxyOptions, keys: TeamKeys):
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.service: ProxyService = self._run(ProxyService(settings, options, team_keys=keys).start())
        self._run(self.service.wait_listening())

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(120)

    def stop(self) -> None:
        self._run(self.service.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)


class TrainerThread:
    """The trainer's loop in a thread; stopping sets the flag SIGTERM sets in the process."""

    def __init__(self, settings: Settings, options: TrainerOptions):
        self.trainer = Trainer(settings, options)
        self.thread = threading.Thread(target=self.trainer.run, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.trainer.stopping = True
        self.thread.join(120)


def rollout_process(config_path: Path, resource_id: str, log_path: Path) -> subprocess.Popen:
    """A rollout worker (`python -m services.rollout`) in its own session, as `up` starts it."""
    with open(log_path, "ab") as log:
        return subprocess.Popen([sys.executable, "-m", "services.rollout", "--config", str(config_path),
                                 "--resource-id", resource_id], stdout=log, stderr=log, start_new_session=True)


def discovering_proxy(settings: Settings, tmp_path: Path) -> tuple[ProxyOptions, TeamKeys]:
    """A proxy that finds its engines on the status topic and obeys the control topic, with one team key
    (`key-default`) for the settings' team."""
    options = ProxyOptions.model_validate({"port": 0, "engines": [], "served_model": "tiny", "heartbeat_s": 0.5})
    return options, TeamKeys(tmp_path / "teams.json", {settings.team: "key-default"})


class InProcessStack:
    """The parts a test started, each stopped once at `close`, in `Stage` order."""

    def __init__(self) -> None:
        self._stops: list[tuple[Stage, Callable[[], object]]] = []

    def add(self, stop: Callable[[], object], stage: Stage) -> None:
        self._stops.append((stage, stop))

    def proxy(self, settings: Settings, options: ProxyOptions, keys: TeamKeys) -> ProxyService:
        running = ProxyThread(settings, options, keys)
        self.add(running.stop, Stage.PROXY)
        return running.service

    def agents(self, worker: AgentWorker) -> AgentsThread:
        running = AgentsThread(worker)
        self.add(running.stop, Stage.CALLERS)
        return running

    def scheduler(self, service: StoppableService) -> ServiceThread:
        running = ServiceThread(service, join_s=30)
        self.add(running.close, Stage.SCHEDULER)
        return running

    def caller(self, service: StoppableService) -> ServiceThread:
        """A service that calls the proxy (the eval service), stopped with the agents."""
        running = ServiceThread(service)
        self.add(running.close, Stage.CALLERS)
        return running

    def trainer(self, settings: Settings, options: TrainerOptions) -> Trainer:
        running = TrainerThread(settings, options)
        self.add(running.stop, Stage.TRAINER)
        return running.trainer

    def assembler(self, settings: Settings, tmp_path: Path) -> AssemblerProcess:
        process = AssemblerProcess(settings, tmp_path).start()
        self.add(process.stop, Stage.ASSEMBLER)
        return process

    def process(self, proc: subprocess.Popen) -> subprocess.Popen:
        """A process of the stack (a rollout worker): SIGTERM, then up to 60 s to exit."""
        def stop() -> None:
            proc.terminate()
            proc.wait(60)

        self.add(stop, Stage.PROCESSES)
        return proc

    def close(self) -> None:
        """Stop every part, even when one fails to stop; then raise the first failure."""
        order = sorted(reversed(self._stops), key=lambda entry: entry[0])  # stable: last started first per stage
        self._stops = []
        failures = []
        for _, stop in order:
            try:
                stop()
            except Exception as exc:  # the rest must still stop
                failures.append(exc)
        if failures:
            raise failures[0]

    def __enter__(self) -> InProcessStack:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, *_: object) -> None:
        try:
            self.close()
        except Exception:
            if exc_type is None:  # a failure of the test itself is the one to report
                raise

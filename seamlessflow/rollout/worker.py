"""A rollout worker's behaviour: one engine, the control commands it obeys, the status it reports.

No Kafka here (the service feeds commands in and publishes what comes out). Epochs, duplicates, the
restart policy and which command a worker accepts in which role are `seamlessflow.core.control`'s rules;
this module carries admitted commands out on the engine. Every command yields exactly one `CommandAck`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from pathlib import Path

import httpx

from seamlessflow.core.control import Capabilities, CommandKind, ControlProtocol, Outcome, PauseMode, Reply
from seamlessflow.core.resources import ResourceKind, ResourceState, Tag
from seamlessflow.kafka.records import resource_status
from seamlessflow.messages import CommandAck, ControlCommand, ResourceStatus
from seamlessflow.rollout.adapters import AdapterLoadFailed, Adapters
from seamlessflow.rollout.loading import reload_unsafe_reason, wait_for_label
from seamlessflow.rollout.options import RolloutOptions, WorkerSpec
from seamlessflow.rollout.vllm_process import EngineProcess, EngineStartFailed
from seamlessflow.weights.engine_client import EngineClient, EngineError
from seamlessflow.weights.fence import FenceError, NoFence, VersionFence
from seamlessflow.weights.http_files import local_weights, prune_copies

log = logging.getLogger(__name__)

ROLES = tuple(Tag)  # rollout, train, idle
KEPT_COPIES = 2  # versions fetched over HTTP kept on the worker's disk: the one loaded and the one before


def capabilities(spec: WorkerSpec) -> Capabilities:
    """Any worker can serve or idle; it trains only if tagged so. Pause/resume need the rollout role."""
    serving = frozenset({Tag.ROLLOUT})
    roles = frozenset(r for r in ROLES if r is not Tag.TRAIN or r in spec.capability_tags)
    return Capabilities({CommandKind.SET_ACTIVE: None, CommandKind.PAUSE: serving, CommandKind.RESUME: serving,
                         CommandKind.LOAD_WEIGHTS: None, CommandKind.SHUTDOWN: None}, roles)


class CommandFailed(RuntimeError):
    """The command was valid but could not be carried out."""


class CommandRejected(ValueError):
    """The command cannot apply to this worker (unknown, malformed, or wrong for its role)."""


class RolloutWorker:
    """Owns one engine. `handle` applies a command; `status` describes the worker now."""

    def __init__(self, resource_id: str, options: RolloutOptions, model_dir: Path, log_dir: Path,
                 team: str = "default", run: str = "default", engine: EngineProcess | None = None,
                 client: EngineClient | None = None, generation: str | None = None,
                 fence: VersionFence | None = None):
        self.resource_id, self.options, self.team, self.run = resource_id, options, team, run
        self.fence = fence or NoFence()  # the proxies, told before the engine's weights change (`weights.fence`)
        self.spec: WorkerSpec = options.worker(resource_id)
        self.engine = engine or EngineProcess(options, self.spec, log_dir / f"rollout-{resource_id}-engine.log")
        self.client = client or EngineClient(self.engine.url)
        self.weights_dir = Path(model_dir)
        self.weights_cache = Path(log_dir) / f"weights-{resource_id}"  # versions fetched over HTTP
        self.weight_version = 0
        self.pushed_version = 0  # streamed into the running engine by the trainer's transfer group (no command)
        self.newest: tuple[int, str] = (0, "")  # newest version heard of (weights topic, commands) and its files
        self.adapters = Adapters(options.lora_adapters, self.weights_cache / "adapters")  # their own versions
        self.protocol = ControlProtocol(resource_id, capabilities(self.spec), self.spec.active_tag,
                                        generation=generation)
        self.state = ResourceState.STARTING
        self.restarts = 0
        self.asleep = False
        self.engine_ready = False  # the engine answered its health check since it was last started
        self.stopped = False
        self.last_swap: tuple[str, float] | None = None  # (method, ms)
        self._lock = threading.RLock()

    @property
    def active_tag(self) -> str:
        return self.protocol.view.active

    @property
    def epoch(self) -> int:
        return self.protocol.epoch

    # -- life cycle -------------------------------------------------------------------------------

    def start(self) -> None:
        """Bring the engine up if the worker starts in the rollout role."""
        with self._lock:
            if self.active_tag == Tag.ROLLOUT:
                self._start_engine()
                self.catch_up()
            self.state = ResourceState.ACTIVE

    def close(self) -> None:
        """Stops the engine for good, out of routing first (`retire`)."""
        with self._lock:
            self.retire()
            self.engine.stop()
            self.client.close()

    def retire(self) -> None:
        """Takes a serving engine out of routing at every proxy before it stops (a scale-down, `down`, a shutdown
        command): each proxy cuts the calls it generates, and they continue on the other engines as token-in
        continuations, exact in tokens and versions as across a weight update; so stopping an engine fails no
        agent call. A proxy that does not confirm is only logged: its calls move when the stream breaks, as
        after an engine crash. The proxies end the hold when this worker's last heartbeat says stopped."""
        if self.active_tag != Tag.ROLLOUT or not self.engine.running():
            return
        try:
            self.fence.hold(self.engine.url)
            log.info("%s: engine out of routing at every proxy; stopping it", self.resource_id)
        except FenceError as exc:
            log.warning("%s: not every proxy took the engine out of routing before it stops: %s",
                        self.resource_id, exc)

    @property
    def engine_wanted(self) -> bool:
        """The engine should be running: serving rollouts, or kept warm through a role switch."""
        return not self.stopped and (self.active_tag == Tag.ROLLOUT or self.options.release_mode != "stop")

    def check_engine(self) -> bool:
        """Restart a crashed engine; True when a restart happened."""
        with self._lock:
            if not self.engine_wanted or self.engine.running() or self.state == ResourceState.STARTING:
                return False
            paused = self.state == ResourceState.PAUSED
            self.restarts += 1
            self.state = ResourceState.FAILED
            log.error(
                "%s: engine exited (restart %d of %d)", self.resource_id, self.restarts, self.options.max_restarts
            )
            if self.restarts > self.options.max_restarts:
                self.stopped = True
                return False
            try:
                self._start_engine()
                self.catch_up()
            except (EngineStartFailed, EngineError, OSError):
                log.exception("%s: engine restart failed", self.resource_id)
                self.state = ResourceState.FAILED
                return False
            if paused:
                self.client.pause(self.options.pause_mode)
            self.state = ResourceState.PAUSED if paused else ResourceState.ACTIVE
            return True

    # -- commands ---------------------------------------------------------------------------------

    def addressed_to_me(self, command: ControlCommand) -> bool:
        return self.protocol.addressed(command)

    def restore(self, history: Iterable[ControlCommand]) -> ControlCommand | None:
        """The commands found on the topic at start: the one to `handle` now (see `core.control`)."""
        return self.protocol.restore(history)

    def handle(self, command: ControlCommand) -> CommandAck:
        started = time.monotonic()
        with self._lock:
            reply = self.protocol.admit(command)
            if reply is None:
                reply = self.protocol.settle(command, self._carry_out(command))
        return CommandAck.answering(command, self.resource_id, reply.outcome, reply.reason,
                                    (time.monotonic() - started) * 1000, self.team, self.run)

    def _carry_out(self, command: ControlCommand) -> Reply:
        action = getattr(self, f"_do_{command.command}")
        try:
            return Reply(Outcome.OK, action(command))
        except CommandRejected as exc:
            return Reply(Outcome.REJECTED, str(exc))
        except (CommandFailed, EngineError, EngineStartFailed, OSError) as exc:
            log.exception("%s: %s failed", self.resource_id, command.command)
            return Reply(Outcome.FAILED, str(exc))

    def _do_pause(self, command: ControlCommand) -> str:
        mode = command.mode or self.options.pause_mode
        self._require_serving("pause")
        self.client.pause(mode)
        self.state = ResourceState.PAUSED
        return f"paused ({mode})"

    def _do_resume(self, command: ControlCommand) -> str:
        self._require_serving("resume")
        self.client.resume()
        self.state = ResourceState.ACTIVE
        return "resumed"

    def _do_load_weights(self, command: ControlCommand) -> str:
        if command.weight_version is None:
            raise CommandRejected("load_weights needs weight_version and weight_uri")
        self.hear_of(command.weight_version, command.weight_uri or "")
        if command.weight_version < self._held():  # a late or replayed command: versions never go backwards
            return f"v{command.weight_version} not loaded: v{self._held()} is newer and stays"
        if self.engine.running():
            return self._bring_to(command.weight_version, command.weight_uri or "")
        path = self._files(command.weight_version, command.weight_uri or "")
        self.weights_dir, self.weight_version = path, command.weight_version
        return f"v{command.weight_version} recorded; the engine loads it when it starts"

    def hear_of(self, version: int, uri: str) -> None:
        """The newest version announced (weights topic at start, load commands): what `catch_up` reaches."""
        if version >= self.newest[0]:
            self.newest = (version, uri or (self.newest[1] if version == self.newest[0] else ""))

    def catch_up(self) -> None:
        """After the engine (re)starts, before the worker reports it serving: bring it to the newest version
        it has heard of. A worker that cannot serves what it holds, labelled truthfully (the scheduler's
        `load_weights` tries again)."""
        version, uri = self.newest
        if version > self._held():
            try:
                log.info("%s: catching up to v%d: %s", self.resource_id, version, self._bring_to(version, uri))
            except (CommandFailed, CommandRejected, EngineError, EngineStartFailed) as exc:
                log.warning("%s: could not catch up to v%d: %s", self.resource_id, version, exc)

    def hear_of_adapter(self, name: str, version: int, uri: str) -> None:
        """A version of the LoRA adapter `name` (weights topic): loaded live when the engine serves
        (`bring_adapters`), else when it starts. Never a base version's path (reload or restart)."""
        with self._lock:
            self.adapters.hear_of(name, version, uri)

    def bring_adapters(self) -> list[str]:
        """Loads every adapter's newest version into the serving engine, each fenced at the proxies
        (`rollout.adapters`); what was done, one line each. Not serving: they load when the engine starts."""
        with self._lock:
            if self.active_tag != Tag.ROLLOUT or not self.engine.running() or self.asleep \
                    or self.state in (ResourceState.STARTING, ResourceState.SWITCHING):
                return []
            done = []
            for name in self.adapters.behind():
                try:
                    done.append(self.adapters.load_live(name, self.client, self.fence, self.engine.url))
                except AdapterLoadFailed as exc:
                    log.warning("%s: %s", self.resource_id, exc)
                    done.append(str(exc))
            return done

    def _held(self) -> int:
        return max(self.weight_version, self.pushed_version)

    def _bring_to(self, version: int, uri: str) -> str:
        """The one path a version takes into a running engine: already there (the trainer's transfer group
        streamed it), streamed while we wait (a worker that just joined: the trainer sends the current
        version to an engine behind it), or else loaded from its files."""
        began = time.monotonic()
        if self.options.weight_transfer:
            label = wait_for_label(self.client, version, self.options.transfer_wait_s)
            self.adopt_engine_version(label)
            if self.pushed_version >= version:
                return (f"v{self.pushed_version} in the engine through the transfer group "
                        f"({time.monotonic() - began:.1f} s)")
        if not uri:
            raise CommandRejected(
                f"v{version} has no files (transfer only) and did not arrive through a transfer group"
            )
        path = self._files(version, uri)
        errors = []
        for method in self.options.weight_load_methods:
            unsafe = reload_unsafe_reason(path) if method == "reload" else None
            if unsafe:
                errors.append(f"reload: {unsafe}")
                continue
            began = time.monotonic()
            try:
                getattr(self, f"_swap_by_{method}")(path, version)
            except (EngineError, EngineStartFailed) as exc:
                errors.append(f"{method}: {exc}")
                log.warning("%s: weight load by %s failed: %s", self.resource_id, method, exc)
                continue
            elapsed_ms = (time.monotonic() - began) * 1000
            self.weights_dir, self.weight_version, self.last_swap = path, version, (method, elapsed_ms)
            prune_copies(self.weights_cache, KEPT_COPIES, protect=path)
            skipped = f" ({'; '.join(errors)})" if errors else ""
            return f"v{version} loaded by {method} in {elapsed_ms:.0f} ms{skipped}"
        raise CommandFailed("; ".join(errors) or "no weight load method configured")

    def _files(self, version: int, uri: str) -> Path:
        if not uri:
            raise CommandRejected("load_weights needs weight_version and weight_uri")
        try:
            path = local_weights(uri, self.weights_cache)
        except ValueError as exc:
            raise CommandRejected(str(exc)) from exc
        except httpx.HTTPError as exc:
            raise CommandFailed(f"cannot fetch {uri}: {exc}") from exc
        if not (path / "config.json").exists():
            raise CommandFailed(f"no HF model directory at {path}")
        return path

    def _swap_by_reload(self, path: Path, version: int) -> None:
        """In place: generation is held (in-flight requests kept) only while the tensors are copied. The
        proxies hold the engine from before the pause to its label (a failed reload leaves it held: its
        weights are unknown until a restart or the next version releases it)."""
        was_paused = self.state == ResourceState.PAUSED
        self._hold_at_proxies()
        if not was_paused:
            self.client.pause(PauseMode.KEEP)
        try:
            self.client.reload_weights(str(path))
            if self.options.kv_after_swap == "recompute" and not self.client.reset_prefix_cache(reset_running=True):
                raise EngineError("the prefix cache could not be reset after the reload (stale KV would be reused)")
            self.client.set_weight_version(version)
            self._release_at_proxies(version)
        finally:
            if not was_paused:
                self.client.resume()

    def _swap_by_restart(self, path: Path, version: int) -> None:
        was_paused = self.state == ResourceState.PAUSED
        self.state = ResourceState.SWITCHING
        self.engine.stop()
        self.weights_dir = path
        self._start_engine(version)
        if was_paused:
            self.client.pause(self.options.pause_mode)
        self.state = ResourceState.PAUSED if was_paused else ResourceState.ACTIVE

    def _do_set_active(self, command: ControlCommand) -> str:
        role = command.role  # one of this worker's roles: the protocol checked it
        if role == self.active_tag:
            return f"already {role}"
        self.state = ResourceState.SWITCHING
        if role == Tag.ROLLOUT:
            detail = self._reacquire()
        else:
            detail = self._release()
        self.state = ResourceState.ACTIVE  # the active tag changes when the protocol settles the command
        return f"{role}: {detail}"

    def _reacquire(self) -> str:
        if self.asleep:
            self.client.wake_up()
            self.asleep = False
            return "engine woken"
        if not self.engine.running():
            self._start_engine()
            self.catch_up()
            return "engine started"
        self.client.resume()
        return "engine kept running"

    def _release(self) -> str:
        """Free what the other role needs: stop the engine (CPU), or sleep it (GPU sleep mode)."""
        mode = self.options.release_mode
        if mode == "stop":
            self.engine.stop()
            return "engine stopped"
        self.client.pause(PauseMode.KEEP)
        if mode == "sleep":
            self.client.sleep(1)
            self.asleep = True
            return "engine asleep"
        return "engine paused, resources kept"

    def _do_shutdown(self, command: ControlCommand) -> str:
        self.stopped = True
        self.retire()
        self.engine.stop()
        self.state = ResourceState.STOPPED
        return "engine stopped; worker exiting"

    def _require_serving(self, what: str) -> None:
        if self.active_tag != Tag.ROLLOUT or not self.engine.running():
            raise CommandRejected(f"cannot {what}: the engine is not serving (active tag '{self.active_tag}')")

    def adopt_engine_version(self, label: str | None) -> None:
        """The engine's own version label, read with each heartbeat. A version the trainer streamed in
        through a transfer group arrives without a command; reporting it lets the proxy label tokens with it."""
        if label and label.isdigit():
            self.pushed_version = max(self.pushed_version, int(label))

    def _start_engine(self, version: int | None = None) -> None:
        """Start the engine on `weights_dir`, which holds `version` (default: the files' version loaded last).
        Fenced at the proxies: a restarted engine serves that version, whatever a proxy last knew of it."""
        version = self.weight_version if version is None else version
        self.pushed_version = 0  # a fresh engine holds the files' version until the trainer sends it another
        self.state, self.engine_ready = ResourceState.STARTING, False
        self._hold_at_proxies()
        self.engine.start(self.weights_dir)
        self.engine_ready = True
        if version:
            self.client.set_weight_version(version)
        for name, adapter_version in self.adapters.on_engine_start(self.client).items():  # still held: exact
            self._release_at_proxies(adapter_version, adapter=name)
        self._release_at_proxies(version)

    def _hold_at_proxies(self) -> None:
        try:
            self.fence.hold(self.engine.url)
        except FenceError as exc:
            raise EngineError(str(exc)) from exc

    def _release_at_proxies(self, version: int, adapter: str | None = None) -> None:
        try:
            self.fence.release(self.engine.url, version, adapter=adapter)
        except FenceError as exc:
            raise EngineError(str(exc)) from exc

    # -- status -----------------------------------------------------------------------------------

    def status(self, figures: dict[str, float]) -> ResourceStatus:
        return resource_status(
            self.resource_id,
            ResourceKind.ROLLOUT,
            self.state,
            self.active_tag,
            self.team,
            self.run,
            capability_tags=self.spec.capability_tags,
            weight_version=max(self.weight_version, self.pushed_version),
            figures=figures,
            engine_url=self.engine.url,
            epoch=self.epoch,
            hardware_tags=self.spec.hardware_tags,
        )

    def base_figures(self) -> dict[str, float]:
        figures = {
            "engine_restarts": float(self.restarts),
            "engine_up": float(self.engine_ready and self.engine.running() and not self.asleep),
            "engine_pid": float(self.engine.pid or 0),
            "weight_transfer": float(bool(self.options.weight_transfer)),
        }
        if self.last_swap:
            figures["last_swap_ms"] = self.last_swap[1]
        figures.update(self.adapters.figures())  # `adapter_version:<name>`: the proxies raise their labels to them
        return figures

"""A rollout worker's LoRA adapters: each team adapter's versions, loaded live into the running engine.

A stack trains the base or adapters; one trainer per adapter team publishes versions of its adapter
(`WeightVersion.adapter` set, format "peft-lora": the uri names a PEFT directory of the adapter's tensors only).
Such a version never goes through `reload_weights` or a restart (those load base weights); it goes into the
running engine in place, under the same fence as a base version (`seamlessflow.weights.fence`):

1. the proxies hold the engine (they cut its streams, keeping the tokens read, and route nothing to it);
2. the adapter is unloaded and loaded again from the new files (a new adapter id, so no cached KV of the old
   weights matches); nobody calls it in between, the engine being held. Not `load_inplace`: vLLM 0.32 keeps that
   flag on the adapter and then reloads it from disk on every batch that uses it. A load that fails loads the files
   it had again, and the engine is released with the version it holds;
3. the prefix cache is reset, running requests included: no KV computed with the old adapter weights is reused;
4. the proxies are released with the version, naming the adapter: they label that adapter's calls with it, the
   base's calls and the other adapters' keep theirs.

Nothing is read from the engine between 1 and 4, so every token recorded for an adapter call carries the version
of the adapter that generated it, exactly as for base versions. A fresh engine serves the adapters' configured
files (version 0): before it is released, the worker loads each adapter's newest version again (`on_engine_start`),
and the release after the start labels each adapter with what the engine holds then.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import httpx

from seamlessflow.model.lora import CONFIG_FILE, TeamAdapter, version_figures
from seamlessflow.weights.engine_client import EngineClient, EngineError
from seamlessflow.weights.fence import FenceError, VersionFence
from seamlessflow.weights.http_files import local_weights, prune_copies

log = logging.getLogger(__name__)

KEPT_COPIES = 2  # fetched copies kept per adapter: the one loaded and the one before


class AdapterLoadFailed(RuntimeError):
    """An adapter's version could not be put into the engine (its files, the engine, or a proxy)."""


@dataclass(frozen=True)
class Heard:
    version: int
    uri: str


class Adapters:
    """The adapters the engine serves: the newest version heard of each, and the version the engine holds."""

    def __init__(self, served: Iterable[TeamAdapter], cache: Path):
        self.served = {a.name: a for a in served}
        self.cache = Path(cache)  # versions fetched over HTTP, one folder per adapter
        self.newest: dict[str, Heard] = {}
        self.held: dict[str, int] = {}  # in the running engine; absent: its configured files (version 0)
        self.held_files: dict[str, Path] = {}  # the directory each held version was loaded from

    def hear_of(self, name: str, version: int, uri: str) -> bool:
        """A version announced for `name` (weights topic); True when it is newer than any heard of before.
        Versions never go backwards; an adapter the engine does not serve is ignored."""
        if name not in self.served:
            log.warning("version %d of adapter %s ignored: this engine does not serve it", version, name)
            return False
        if name in self.newest and version <= self.newest[name].version:
            return False
        self.newest[name] = Heard(version, uri)
        return True

    def version(self, name: str) -> int:
        return self.held.get(name, 0)

    def behind(self) -> list[str]:
        """The adapters whose newest version is not in the engine yet."""
        return [name for name, heard in sorted(self.newest.items()) if heard.version > self.version(name)]

    def load_live(self, name: str, client: EngineClient, fence: VersionFence, engine_url: str) -> str:
        """Puts `name`'s newest version into the running engine, fenced at every proxy (see the module)."""
        heard = self.newest[name]
        path = self._files(name, heard)  # fetched before the hold: the engine keeps serving meanwhile
        try:
            fence.hold(engine_url)
        except FenceError as exc:
            raise AdapterLoadFailed(f"adapter {name} v{heard.version}: {exc}") from exc
        try:
            self._swap(client, name, path)
        except EngineError as exc:  # the old files are back in: release the engine with their version, truthfully
            self._release(fence, engine_url, name, self.version(name))
            raise AdapterLoadFailed(f"adapter {name} v{heard.version} not loaded: {exc}") from exc
        # the new weights are in: a failure from here leaves the engine held (its cached KV may be stale) until
        # a later version of this adapter or an engine restart releases it
        if not client.reset_prefix_cache(reset_running=True):
            raise AdapterLoadFailed(f"adapter {name} v{heard.version}: the prefix cache could not be reset "
                                    "(KV of the old adapter weights would be reused); the engine stays held")
        self.held[name], self.held_files[name] = heard.version, path
        self._release(fence, engine_url, name, heard.version)
        prune_copies(self.cache / name, KEPT_COPIES, protect=path)
        return f"adapter {name} v{heard.version} loaded from {path}"

    def on_engine_start(self, client: EngineClient) -> dict[str, int]:
        """A fresh engine, held at the proxies, serves every adapter's configured files: loads each one's newest
        version before it is released (it has served nothing yet: no KV to drop). Returns the version each adapter
        with versions holds now, for the release (one whose load failed holds its configured files, version 0:
        labelled so, truthfully)."""
        self.held.clear()
        self.held_files.clear()
        for name in self.behind():
            heard = self.newest[name]
            try:
                path = self._files(name, heard)
                self._swap(client, name, path)
                self.held[name], self.held_files[name] = heard.version, path
            except (AdapterLoadFailed, EngineError) as exc:
                log.warning("adapter %s v%d not loaded into the started engine: %s", name, heard.version, exc)
        return {name: self.version(name) for name in sorted(self.newest)}

    def _swap(self, client: EngineClient, name: str, path: Path) -> None:
        """Unloads `name` and loads it from `path`; when that load fails, loads the files it held again (the
        configured ones before any version) and raises the failure."""
        client.unload_lora_adapter(name)
        try:
            client.load_lora_adapter(name, str(path))
        except EngineError:
            client.load_lora_adapter(name, str(self.held_files.get(name, self.served[name].path)))
            raise

    def figures(self) -> dict[str, float]:
        """The versions the engine holds, for the worker's heartbeat (the proxies raise their labels to them)."""
        return version_figures({name: self.version(name) for name in self.newest})

    def _files(self, name: str, heard: Heard) -> Path:
        try:
            path = local_weights(heard.uri, self.cache / name)
        except (ValueError, httpx.HTTPError) as exc:
            raise AdapterLoadFailed(f"adapter {name} v{heard.version}: cannot fetch {heard.uri}: {exc}") from exc
        if not (path / CONFIG_FILE).exists():
            raise AdapterLoadFailed(f"adapter {name} v{heard.version}: no PEFT directory at {path}")
        return path

    @staticmethod
    def _release(fence: VersionFence, engine_url: str, name: str, version: int) -> None:
        try:
            fence.release(engine_url, version, adapter=name)
        except FenceError as exc:
            raise AdapterLoadFailed(f"adapter {name} v{version}: {exc}") from exc

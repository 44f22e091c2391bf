"""A rollout worker's LoRA adapters' versions without an engine (fakes journal what the fence and the engine were
asked, in order): a version goes live inside a hold, its release names the adapter, a base version's path is never
taken, and a (re)started engine loads each adapter's newest version before it is released."""

from __future__ import annotations

from pathlib import Path

from seamlessflow.model.lora import TeamAdapter
from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.worker import RolloutWorker
from seamlessflow.weights.engine_client import EngineError

ADAPTERS = [TeamAdapter(name="red", path="/adapters/red", rank=4), TeamAdapter(name="blue", path="/b", rank=8)]


class Journal:
    def __init__(self) -> None:
        self.calls: list[tuple] = []

    def hold(self, engine_url):
        self.calls.append(("hold",))

    def release(self, engine_url, version, adapter=None):
        self.calls.append(("release", version, adapter) if adapter else ("release", version))


class Client:
    def __init__(self, journal: Journal, fail_load: bool = False, reset_ok: bool = True):
        self.journal, self.fail_load, self.reset_ok = journal, fail_load, reset_ok

    def unload_lora_adapter(self, name):
        self.journal.calls.append(("unload", name))

    def load_lora_adapter(self, name, path):
        if self.fail_load and Path(path).name.startswith("v0"):  # a version's files; the configured ones load
            raise EngineError("/v1/load_lora_adapter: HTTP 500")
        self.journal.calls.append(("load", name, Path(path).name))

    def reset_prefix_cache(self, reset_running=False):
        self.journal.calls.append(("reset", reset_running))
        return self.reset_ok

    def set_weight_version(self, version):
        self.journal.calls.append(("label", version))

    def reload_weights(self, path):  # a base version's path: never taken by an adapter's version
        self.journal.calls.append(("reload",))

    def pause(self, mode):
        self.journal.calls.append(("pause",))

    def resume(self):
        self.journal.calls.append(("resume",))


class Engine:
    url, pid = "http://127.0.0.1:9", None

    def __init__(self, journal: Journal, up: bool = True):
        self.journal, self.up = journal, up

    def running(self):
        return self.up

    def start(self, model_dir):
        self.journal.calls.append(("start",))
        self.up = True

    def stop(self, grace_s=20.0):
        self.journal.calls.append(("stop",))
        self.up = False


def adapter_version(root: Path, name: str, version: int) -> str:
    path = root / "versions" / name / f"v{version:06d}"
    path.mkdir(parents=True)
    (path / "adapter_config.json").write_text("{}")
    (path / "adapter_model.safetensors").write_bytes(b"")
    return path.as_uri()


def worker_of(tmp_path: Path, journal: Journal, client: Client | None = None, up: bool = True) -> RolloutWorker:
    options = RolloutOptions(lora_adapters=ADAPTERS, workers={"r0": {"capability_tags": ["rollout"]}})
    worker = RolloutWorker("r0", options, tmp_path / "model", tmp_path / "logs", engine=Engine(journal, up),
                           client=client or Client(journal), fence=journal)  # type: ignore[arg-type]
    worker.state = worker.state.ACTIVE
    return worker


def test_an_adapters_version_goes_live_inside_a_hold_whose_release_names_it(tmp_path):
    journal = Journal()
    worker = worker_of(tmp_path, journal)
    worker.hear_of_adapter("red", 1, adapter_version(tmp_path, "red", 1))
    assert worker.bring_adapters() == [f"adapter red v1 loaded from {tmp_path / 'versions/red/v000001'}"]
    assert journal.calls == [("hold",), ("unload", "red"), ("load", "red", "v000001"), ("reset", True),
                             ("release", 1, "red")]  # a new adapter id: no KV of the old weights is matched
    assert worker.newest == (0, "") and worker.status({}).weight_version == 0  # the base's version: untouched
    figures = worker.base_figures()
    assert figures["adapter_version:red"] == 1.0 and "adapter_version:blue" not in figures
    assert worker.bring_adapters() == [] and len(journal.calls) == 5  # nothing newer: nothing done


def test_older_versions_and_adapters_the_engine_does_not_serve_are_ignored(tmp_path):
    journal = Journal()
    worker = worker_of(tmp_path, journal)
    worker.hear_of_adapter("red", 2, adapter_version(tmp_path, "red", 2))
    worker.hear_of_adapter("red", 1, adapter_version(tmp_path, "red", 1))  # late: versions never go backwards
    worker.hear_of_adapter("green", 5, adapter_version(tmp_path, "green", 5))
    worker.bring_adapters()
    assert [c for c in journal.calls if c[0] in ("load", "release")] == [("load", "red", "v000002"),
                                                                         ("release", 2, "red")]


def test_a_version_the_engine_refuses_releases_the_engine_with_the_adapter_it_kept(tmp_path):
    journal = Journal()
    worker = worker_of(tmp_path, journal, Client(journal, fail_load=True))
    worker.hear_of_adapter("red", 1, adapter_version(tmp_path, "red", 1))
    [line] = worker.bring_adapters()
    assert "not loaded" in line and "HTTP 500" in line
    # the configured files are loaded again and the engine released with them, truthfully labelled
    assert journal.calls == [("hold",), ("unload", "red"), ("load", "red", "red"), ("release", 0, "red")]
    assert worker.adapters.behind() == ["red"]  # tried again with the next version or the next start


def test_a_prefix_cache_that_cannot_be_reset_leaves_the_engine_held(tmp_path):
    journal = Journal()
    worker = worker_of(tmp_path, journal, Client(journal, reset_ok=False))
    worker.hear_of_adapter("red", 1, adapter_version(tmp_path, "red", 1))
    [line] = worker.bring_adapters()
    assert "stays held" in line
    assert journal.calls == [("hold",), ("unload", "red"), ("load", "red", "v000001"), ("reset", True)]  # no release


def test_missing_files_fail_before_the_engine_is_held(tmp_path):
    journal = Journal()
    worker = worker_of(tmp_path, journal)
    worker.hear_of_adapter("red", 1, (tmp_path / "nowhere").as_uri())
    [line] = worker.bring_adapters()
    assert "no PEFT directory" in line and journal.calls == []


def test_an_engine_not_serving_loads_the_adapters_when_it_starts_before_it_is_released(tmp_path):
    journal = Journal()
    worker = worker_of(tmp_path, journal, up=False)
    worker.hear_of_adapter("red", 3, adapter_version(tmp_path, "red", 3))
    worker.hear_of_adapter("blue", 1, (tmp_path / "gone").as_uri())  # its files are gone: it serves version 0
    assert worker.bring_adapters() == [] and journal.calls == []  # no engine: nothing to load into
    worker.start()
    assert journal.calls == [("hold",), ("start",), ("unload", "red"), ("load", "red", "v000003"),
                             ("release", 0, "blue"), ("release", 3, "red"), ("release", 0)]
    assert worker.adapters.held == {"red": 3}
    journal.calls.clear()
    worker.engine.stop()  # a crash: the restarted engine serves the configured files until they load again
    assert worker.check_engine()
    assert journal.calls[1:] == [("hold",), ("start",), ("unload", "red"), ("load", "red", "v000003"),
                                 ("release", 0, "blue"), ("release", 3, "red"), ("release", 0)]


def test_a_worker_without_adapters_releases_only_the_base(tmp_path):
    journal = Journal()
    options = RolloutOptions(workers={"r0": {"capability_tags": ["rollout"]}})
    worker = RolloutWorker("r0", options, tmp_path / "model", tmp_path / "logs", engine=Engine(journal, False),
                           client=Client(journal), fence=journal)  # type: ignore[arg-type]
    worker.start()
    assert journal.calls == [("hold",), ("start",), ("release", 0)]
    assert not any(k.startswith("adapter_version:") for k in worker.base_figures())

"""Command rules of the rollout worker that need no engine (an engine that never runs stands in)."""

import threading
from pathlib import Path

import pytest

from seamlessflow.rollout.options import RolloutOptions
from seamlessflow.rollout.worker import RolloutWorker
from seamlessflow.testing.rollout_fakes import StoppedEngine, command, make_worker
from seamlessflow.weights.engine_client import EngineError
from seamlessflow.weights.fence import FenceError


def test_starts_active_in_its_configured_role_without_an_engine(tmp_path):
    status = make_worker(tmp_path).status({})
    assert (status.state, status.active_tag, status.kind, status.capability_tags) == (
        "active",
        "train",
        "rollout",
        ["rollout", "train"],
    )


def test_hardware_tags_from_the_config_ride_on_every_heartbeat(tmp_path):
    options = RolloutOptions(workers={"r0": {"capability_tags": ["rollout"], "hardware_tags": ["bandwidth", "h20"]}})
    worker = RolloutWorker("r0", options, tmp_path, tmp_path, engine=StoppedEngine())
    assert worker.status({}).hardware_tags == ["bandwidth", "h20"]
    assert make_worker(tmp_path).status({}).hardware_tags == []  # untagged by default


def test_stale_epoch_is_ignored_and_says_why(tmp_path):
    worker = make_worker(tmp_path)
    assert worker.handle(command(5, "set_active", role="idle")).outcome == "ok"
    ack = worker.handle(command(4, "set_active", role="train"))
    assert (ack.outcome, ack.reason) == ("ignored_stale", "epoch 4 <= last consumed 5")
    assert worker.active_tag == "idle"


def test_restart_restores_the_newest_command_and_counts_every_epoch(tmp_path):
    worker = make_worker(tmp_path)
    newest = command(7, "set_active", role="idle")
    assert worker.restore([command(6, "pause"), newest, command(3, "set_active", role="rollout")]) is newest
    assert worker.handle(newest).outcome == "ok" and worker.active_tag == "idle"
    assert worker.handle(command(6, "set_active", role="train")).outcome == "ignored_stale"


def test_duplicate_delivery_is_not_applied_twice(tmp_path):
    worker = make_worker(tmp_path)
    once = command(1, "set_active", role="idle")
    worker.handle(once)
    assert worker.handle(once).reason == "duplicate delivery of a command already handled"


def test_a_rejected_command_consumes_its_epoch(tmp_path):
    worker = make_worker(tmp_path)
    ack = worker.handle(command(3, "pause"))
    assert (ack.outcome, ack.reason) == ("rejected", "cannot pause in role 'train' (only rollout)")
    assert worker.epoch == 3  # a re-delivery is stale, not a second try (core.control)


def test_an_unknown_command_or_role_is_no_command():
    """Not a symbol of the enums: no ControlCommand can hold it (a record holding it does not decode)."""
    with pytest.raises(ValueError, match="'explode' is not a valid CommandKind"):
        command(3, "explode")
    with pytest.raises(ValueError, match="'sing' is not a valid Tag"):
        command(3, "set_active", role="sing")


@pytest.mark.parametrize(
    "fields, outcome, reason",
    [
        ({}, "rejected", "load_weights needs a weight_version"),
        ({"weight_version": 2}, "rejected", "load_weights needs weight_version and weight_uri"),
        ({"weight_version": 2, "weight_uri": "s3://bucket/v2"}, "rejected", "only file:// URIs and paths"),
        ({"weight_version": 2, "weight_uri": "/nowhere/v2"}, "failed", "no HF model directory at /nowhere/v2"),
    ],
)
def test_bad_load_weights(tmp_path, fields, outcome, reason):
    ack = make_worker(tmp_path).handle(command(1, "load_weights", **fields))
    assert ack.outcome == outcome and reason in ack.reason


def test_load_weights_while_the_engine_is_released_is_kept_for_its_next_start(tmp_path):
    worker = make_worker(tmp_path)
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "config.json").write_text("{}")
    ack = worker.handle(command(1, "load_weights", weight_version=2, weight_uri=(tmp_path / "v2").as_uri()))
    assert ack.outcome == "ok" and "loads it when it starts" in ack.reason
    assert (worker.weight_version, worker.weights_dir) == (2, tmp_path / "v2")


def test_pause_needs_a_serving_engine(tmp_path):
    ack = make_worker(tmp_path).handle(command(1, "pause"))
    assert ack.outcome == "rejected" and "cannot pause in role 'train'" in ack.reason


def test_role_outside_the_capability_tags_is_rejected(tmp_path):
    worker = make_worker(tmp_path, tags=("rollout",))
    ack = worker.handle(command(1, "set_active", role="train"))
    assert ack.outcome == "rejected" and "has no 'train' role" in ack.reason


def test_shutdown_stops_the_worker(tmp_path):
    worker = make_worker(tmp_path)
    assert worker.handle(command(1, "shutdown")).outcome == "ok"
    assert worker.stopped and worker.status({}).state == "stopped"


def test_a_version_streamed_into_the_engine_is_reported_and_never_goes_back(tmp_path):
    worker = make_worker(tmp_path)
    worker.adopt_engine_version("3")
    assert worker.status({}).weight_version == 3
    for label in ("2", None, "", "v4"):
        worker.adopt_engine_version(label)
    assert worker.status({}).weight_version == 3


class RunningEngine(StoppedEngine):
    """A fake engine process that is always up (no vLLM); its label lives in `LabelClient`."""

    pid = 4242

    def running(self):
        return True

    def start(self, model_dir):
        pass


class LabelClient:
    """A fake engine client that only knows the version label (what a transfer group's delivery sets)."""

    def __init__(self, label=None):
        self.label = label

    def weight_version(self):
        return self.label

    def set_weight_version(self, version):
        self.label = str(version)

    def close(self):
        pass


def transfer_worker(tmp_path: Path, client: LabelClient, wait_s: float = 0.0) -> RolloutWorker:
    options = RolloutOptions(
        weight_transfer="gloo", transfer_wait_s=wait_s, workers={"r0": {"capability_tags": ["rollout"]}}
    )
    return RolloutWorker("r0", options, tmp_path, tmp_path, engine=RunningEngine(), client=client)  # type: ignore[arg-type]


def test_load_weights_for_a_version_the_transfer_group_already_put_in_needs_no_files(tmp_path):
    worker = transfer_worker(tmp_path, LabelClient("3"))
    ack = worker.handle(command(1, "load_weights", weight_version=3, weight_uri=""))
    assert ack.outcome == "ok" and "through the transfer group" in ack.reason
    assert worker.status({}).weight_version == 3


def test_a_restarted_engine_catches_up_to_the_newest_version_before_it_reports_serving(tmp_path):
    client = LabelClient()
    worker = transfer_worker(tmp_path, client, wait_s=5.0)
    worker.hear_of(2, "")  # version 2 went by transfer only: no files to fall back on
    seen = []
    threading.Timer(0.5, lambda: (seen.append(worker.status({}).state), client.set_weight_version(2))).start()
    worker.start()
    assert seen == ["starting"]  # while it waited for the trainer, it was not serving
    status = worker.status(worker.base_figures())
    assert (status.state, status.weight_version, status.figures["weight_transfer"]) == ("active", 2, 1.0)


def test_a_transfer_only_version_that_never_arrives_is_refused_and_the_engine_keeps_its_label(tmp_path):
    worker = transfer_worker(tmp_path, LabelClient("1"))
    ack = worker.handle(command(1, "load_weights", weight_version=2, weight_uri=""))
    assert ack.outcome == "rejected" and "has no files" in ack.reason
    assert worker.status({}).weight_version == 1


class FilesClient(LabelClient):
    """A fake engine client that takes versions from files (in-place reload) and records where from."""

    def __init__(self, label=None):
        super().__init__(label)
        self.loaded: list[str] = []

    def pause(self, mode):
        pass

    def resume(self):
        pass

    def reload_weights(self, path):
        self.loaded.append(path)

    def reset_prefix_cache(self, reset_running=False):
        return True


def files_worker(tmp_path: Path, client: FilesClient) -> RolloutWorker:
    options = RolloutOptions(weight_load_methods=["reload"], workers={"r0": {"capability_tags": ["rollout"]}})
    return RolloutWorker("r0", options, tmp_path / "model", tmp_path / "logs", engine=RunningEngine(),
                         client=client)  # type: ignore[arg-type]


def test_an_older_version_is_never_loaded_over_a_newer_one(tmp_path):
    client = FilesClient("3")
    worker = files_worker(tmp_path, client)
    worker.adopt_engine_version("3")
    (tmp_path / "v2").mkdir()
    (tmp_path / "v2" / "config.json").write_text("{}")
    ack = worker.handle(command(1, "load_weights", weight_version=2, weight_uri=(tmp_path / "v2").as_uri()))
    assert ack.outcome == "ok" and "v3 is newer and stays" in ack.reason
    assert client.loaded == [] and worker.status({}).weight_version == 3


def test_a_late_engine_catches_up_from_the_trainers_server_into_its_own_directory(tmp_path):
    """No directory of the trainer's here (its token differs, as on another host): the newest announced
    version is fetched over HTTP into the worker's own cache and loaded from there."""
    from seamlessflow.weights.http_files import WeightsServer

    trainer_root = tmp_path / "trainer"
    for version in (1, 2):
        (trainer_root / f"v00000{version}").mkdir(parents=True)
        (trainer_root / f"v00000{version}" / "config.json").write_text(f'{{"v": {version}}}')
    server = WeightsServer(trainer_root, host="127.0.0.1").start()
    (trainer_root / ".weights-server").write_text("another host's view")
    try:
        client = FilesClient()
        worker = files_worker(tmp_path, client)
        worker.hear_of(2, server.uri_for(trainer_root / "v000002"))
        worker.hear_of(1, server.uri_for(trainer_root / "v000001"))  # an older announcement read later
        worker.start()
    finally:
        server.stop()
    fetched = tmp_path / "logs" / "weights-r0" / "v000002"
    assert client.loaded == [str(fetched)] and (fetched / "config.json").read_text() == '{"v": 2}'
    assert worker.status({}).weight_version == 2 and client.label == "2"
    assert [p.name for p in fetched.parent.iterdir()] == ["v000002"]  # the older announcement was not fetched


def test_versions_fetched_over_http_do_not_pile_up_on_the_workers_disk(tmp_path):
    from seamlessflow.weights.http_files import WeightsServer

    trainer_root = tmp_path / "trainer"
    server = WeightsServer(trainer_root, host="127.0.0.1").start()
    (trainer_root / ".weights-server").write_text("another host's view")
    try:
        client = FilesClient("0")
        worker = files_worker(tmp_path, client)
        for version in (1, 2, 3):
            (trainer_root / f"v00000{version}").mkdir(parents=True)
            (trainer_root / f"v00000{version}" / "config.json").write_text("{}")
            uri = server.uri_for(trainer_root / f"v00000{version}")
            ack = worker.handle(command(version, "load_weights", weight_version=version, weight_uri=uri))
            assert ack.outcome == "ok", ack
    finally:
        server.stop()
    assert sorted(p.name for p in (tmp_path / "logs" / "weights-r0").iterdir()) == ["v000002", "v000003"]


class Journal:
    """One list of what the fence and the engine were asked, in order, and a fence that can refuse."""

    def __init__(self, refuse: bool = False):
        self.calls: list[tuple] = []
        self.refuse = refuse

    def hold(self, engine_url):
        if self.refuse:
            raise FenceError("proxy p did not confirm /engines/hold")
        self.calls.append(("hold",))

    def release(self, engine_url, version, adapter=None):
        self.calls.append(("release", version) if adapter is None else ("release", version, adapter))


class JournalledClient(FilesClient):
    def __init__(self, journal: Journal, label=None, fail_reload=False):
        super().__init__(label)
        self.journal, self.fail_reload = journal, fail_reload

    def pause(self, mode):
        self.journal.calls.append(("pause",))

    def resume(self):
        self.journal.calls.append(("resume",))

    def reload_weights(self, path):
        if self.fail_reload:
            raise EngineError("reload failed")
        self.journal.calls.append(("reload",))

    def set_weight_version(self, version):
        super().set_weight_version(version)
        self.journal.calls.append(("label", version))


class JournalledEngine(RunningEngine):
    def __init__(self, journal: Journal):
        self.journal = journal

    def start(self, model_dir):
        self.journal.calls.append(("start",))

    def stop(self, grace_s=20.0):
        self.journal.calls.append(("stop",))


def fenced_worker(tmp_path: Path, journal: Journal, methods: list[str], fail_reload=False) -> RolloutWorker:
    options = RolloutOptions(weight_load_methods=methods, workers={"r0": {"capability_tags": ["rollout"]}})
    (tmp_path / "v2").mkdir(exist_ok=True)
    (tmp_path / "v2" / "config.json").write_text("{}")
    return RolloutWorker("r0", options, tmp_path / "model", tmp_path / "logs", engine=JournalledEngine(journal),
                         client=JournalledClient(journal, "1", fail_reload), fence=journal)  # type: ignore[arg-type]


def test_a_reload_from_files_is_fenced_at_the_proxies_from_before_the_pause_to_before_the_resume(tmp_path):
    journal = Journal()
    worker = fenced_worker(tmp_path, journal, ["reload"])
    ack = worker.handle(command(1, "load_weights", weight_version=2, weight_uri=(tmp_path / "v2").as_uri()))
    assert ack.outcome == "ok", ack
    assert journal.calls == [("hold",), ("pause",), ("reload",), ("label", 2), ("release", 2), ("resume",)]


def test_a_restart_on_new_files_is_fenced_and_a_failed_reload_stays_held_until_then(tmp_path):
    journal = Journal()
    worker = fenced_worker(tmp_path, journal, ["reload", "restart"], fail_reload=True)
    ack = worker.handle(command(1, "load_weights", weight_version=2, weight_uri=(tmp_path / "v2").as_uri()))
    assert ack.outcome == "ok" and "restart" in ack.reason, ack
    assert journal.calls == [("hold",), ("pause",), ("resume",),  # the failed reload: resumed but not released
                             ("stop",), ("hold",), ("start",), ("label", 2), ("release", 2)]


def test_a_proxy_that_refuses_the_hold_fails_the_load_before_the_engine_is_touched(tmp_path):
    journal = Journal(refuse=True)
    worker = fenced_worker(tmp_path, journal, ["reload"])
    ack = worker.handle(command(1, "load_weights", weight_version=2, weight_uri=(tmp_path / "v2").as_uri()))
    assert ack.outcome == "failed" and "did not confirm" in ack.reason, ack
    assert journal.calls == [] and worker.status({}).weight_version == 0


@pytest.mark.parametrize("how", ["close", "shutdown"])
def test_an_engine_leaves_routing_at_every_proxy_before_it_stops(tmp_path, how):
    """A scale-down or `down` (close) and a shutdown command: the proxies hold the engine, so its calls move
    to the other engines, before it stops; a proxy that refuses does not keep it running."""
    for journal, expected in ((Journal(), [("hold",), ("stop",)]), (Journal(refuse=True), [("stop",)])):
        worker = fenced_worker(tmp_path, journal, ["reload"])
        worker.close() if how == "close" else worker.handle(command(1, "shutdown"))
        assert journal.calls[:len(expected)] == expected


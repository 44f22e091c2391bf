"""Memory snapshots start only when asked for, and only in the services named."""

from seamlessflow.memory_probe import DIR_ENV, start_from_environment


def test_tracing_starts_only_when_asked_and_only_in_the_services_named(monkeypatch, tmp_path):
    monkeypatch.setenv("SEAMLESSFLOW_TRACEMALLOC_AFTER_S", "3600")  # the snapshot thread waits, never traces here
    monkeypatch.delenv(DIR_ENV, raising=False)
    assert start_from_environment("services.proxy") is None
    monkeypatch.setenv(DIR_ENV, str(tmp_path / "snaps"))
    monkeypatch.setenv("SEAMLESSFLOW_TRACEMALLOC_ONLY", "trainer, proxy")
    assert start_from_environment("services.assembler") is None
    assert start_from_environment("services.proxy") == tmp_path / "snaps"
    monkeypatch.setenv("SEAMLESSFLOW_TRACEMALLOC_ONLY", "")
    assert start_from_environment("services.assembler") == tmp_path / "snaps"

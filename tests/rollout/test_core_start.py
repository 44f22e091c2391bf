"""The engine-core start plugin: it turns vLLM-CPU's forced spawn into fork only where the environment asks."""

from __future__ import annotations

import os

import pytest
from vllm.platforms import cpu

from seamlessflow.rollout import core_start


@pytest.fixture
def spawning_platform(monkeypatch):
    """CpuPlatform with a stand-in for its config check that does what the real one does to the start method."""
    def check_and_update_config(cls, vllm_config):
        os.environ["VLLM_WORKER_MULTIPROC_METHOD"] = "spawn"

    monkeypatch.setattr(cpu.CpuPlatform, "check_and_update_config", classmethod(check_and_update_config))
    monkeypatch.delenv("VLLM_WORKER_MULTIPROC_METHOD", raising=False)
    return cpu.CpuPlatform


def test_an_engine_asking_for_fork_forks_its_core(spawning_platform, monkeypatch):
    monkeypatch.setenv(core_start.ENV, "fork")
    core_start.register()
    core_start.register()  # vLLM loads plugins once per process, but a second call must not wrap twice
    spawning_platform.check_and_update_config(None)
    assert os.environ["VLLM_WORKER_MULTIPROC_METHOD"] == "fork"
    wrapped = getattr(vars(spawning_platform)["check_and_update_config"].__func__, core_start.SPAWNING)
    assert not hasattr(wrapped, core_start.SPAWNING)  # the stand-in itself: wrapped once


def test_without_the_variable_vllms_choice_stands(spawning_platform, monkeypatch):
    monkeypatch.delenv(core_start.ENV, raising=False)
    core_start.register()
    spawning_platform.check_and_update_config(None)
    assert os.environ["VLLM_WORKER_MULTIPROC_METHOD"] == "spawn"

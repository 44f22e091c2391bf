"""The documentation site builds with `mkdocs build --strict` (mkdocs.yml), so a broken link, a missing anchor
or a page left out of the nav fails the suite, and so does the configuration or CLI reference the hook
generates (docs/hooks/reference.py)."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_site_builds_strictly_without_a_warning(tmp_path):
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "--config-file",
            str(ROOT / "mkdocs.yml"),
            "--site-dir",
            str(tmp_path / "site"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},  # the theme's end-of-life notice, not about our pages
    )
    log = done.stdout + done.stderr
    assert done.returncode == 0, log
    assert not [line for line in log.splitlines() if line.startswith("WARNING")], log
    for page in (
        "index.html",
        "quickstart/index.html",
        "reference/configuration/index.html",
        "reference/cli/index.html",
    ):
        assert (tmp_path / "site" / page).is_file(), page

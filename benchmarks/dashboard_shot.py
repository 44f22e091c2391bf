"""A timed `seamlessflow up` of the embedded default, as a user starts it, with the dashboard's screenshot at the end.

Starts the stack detached in its own data directory (the built default model copied in when given, so the run
does not spend its first minutes building it), waits `--minutes` from the first trainer step, then saves a
full-page screenshot of the dashboard (headless Chromium, as tests/dashboard/test_page.py drives it), prints
`seamlessflow timeline` (every device-second in its account, the bubble) and `seamlessflow evals` (eval accuracy
per version), and stops the stack. The docs' dashboard pictures are taken this way.

Usage: python benchmarks/dashboard_shot.py [--minutes 10] [--out docs/dashboard.png] [--model-cache DIR]
                                            [--config FILE]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).parent
CLI = [str(Path(sys.executable).parent / "seamlessflow")]
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def cli(data_dir: Path, *args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, "--data-dir", str(data_dir), *args], text=True, **kwargs)


def first_step_at(data_dir: Path, timeout_s: float) -> float:
    """When the trainer finished its first step (monotonic), waiting up to `timeout_s` for it."""
    log, deadline = data_dir / "trainer" / "trainer-0" / "steps.jsonl", time.monotonic() + timeout_s
    while not (log.exists() and log.read_text().strip()):
        if time.monotonic() > deadline:
            raise SystemExit(f"no trainer step in {timeout_s:.0f} s ({log})")
        time.sleep(2)
    return time.monotonic()


def screenshot(url: str, path: Path) -> None:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        page.goto(url)
        page.wait_for_selector("body[data-loaded]")
        time.sleep(5)  # a refresh of every panel
        page.screenshot(path=str(path), full_page=True)
        browser.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=HERE / "out" / "dashboard.png")
    parser.add_argument("--data-dir", type=Path, default=HERE / "out" / "dashboard-run")
    parser.add_argument("--model-cache", type=Path, default=Path(".seamlessflow/models/tiny"))
    parser.add_argument("--config", type=Path, help="a config file for `up` (default: the embedded default)")
    args = parser.parse_args()
    shutil.rmtree(args.data_dir, ignore_errors=True)
    args.data_dir.mkdir(parents=True)
    if args.model_cache.exists():
        shutil.copytree(args.model_cache, args.data_dir / "models" / "tiny")
    started = time.monotonic()
    config = ["--config", str(args.config)] if args.config else []
    cli(args.data_dir, *config, "up", "--detach", check=True, stdout=subprocess.DEVNULL)
    try:
        begun = first_step_at(args.data_dir, 1800)
        print(f"first trainer step {begun - started:.0f} s after `up`; running {args.minutes:g} min", flush=True)
        time.sleep(max(0.0, args.minutes * 60 - (time.monotonic() - begun)))
        args.out.parent.mkdir(parents=True, exist_ok=True)
        screenshot("http://127.0.0.1:8300/", args.out)
        print(f"screenshot: {args.out}")
        print(cli(args.data_dir, "timeline", "--out", str(args.out.with_name("timeline.png")),
                  capture_output=True).stdout)
        print(cli(args.data_dir, "evals", "--out", str(args.out.with_name("eval.png")), capture_output=True).stdout)
        steps = (args.data_dir / "trainer" / "trainer-0" / "steps.jsonl").read_text().splitlines()
        print(json.dumps({"trainer_steps": len(steps), "minutes": args.minutes}))
    finally:
        cli(args.data_dir, "down", stdout=subprocess.DEVNULL)


if __name__ == "__main__":
    main()

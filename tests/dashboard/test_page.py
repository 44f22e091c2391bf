"""The dashboard page in a real headless Chromium (Debian's `chromium`, driven by Playwright) against the
real broker: the page loads, the curves have points, the timeline has bars, and a session opens with its
fed and generated tokens, versions and fork. `make test` installs chromium when it is missing."""

import asyncio
import os
import shutil
import threading
import time
from pathlib import Path

import pytest

from seamlessflow.dashboard.app import Dashboard, serve
from seamlessflow.ports import free_port
from seamlessflow.testing import tracking_records
from seamlessflow.testing.dashboard_records import publish_sessions_and_switches
from seamlessflow.testing.tracking_records import (
    adapter_stack,
    create_eval_topic,
    publish_run,
    publish_team_run,
    trainer_status,
)

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="no chromium (make test-deps installs it)")]


def trainer_status_with_mismatch(step, reward, at_ms, **kwargs):
    """A trainer heartbeat with its step's train-inference mismatch figures (#61), as the trainer will send them."""
    status = trainer_status(step, reward, at_ms, **kwargs)
    if step:
        status.figures.update({"mismatch_abs_mean": 0.001 * step, "mismatch_kl": 1e-6 * step, "mismatch_tokens": 64.0,
                               "stale_abs_mean": 0.01 + 0.005 * step, "stale_tokens": 32.0})
    return status


@pytest.fixture
def dashboard_url(settings, codec, monkeypatch):
    create_eval_topic(settings)
    with monkeypatch.context() as patch:  # the run's trainer reports its mismatch
        patch.setattr(tracking_records, "trainer_status", trainer_status_with_mismatch)
        publish_run(settings, codec, steps=6)
    publish_sessions_and_switches(settings, codec)
    dashboard, stop, port = Dashboard(settings), threading.Event(), free_port()
    dashboard.state.mismatch_warn = 0.05  # trainer.mismatch_warn's default, as the trainer's options will say
    thread = threading.Thread(target=lambda: asyncio.run(serve(dashboard, "127.0.0.1", port, stop)), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (len(dashboard.state.sessions) < 2 or len(dashboard.state.evals) < 3):
        time.sleep(0.2)
    yield f"http://127.0.0.1:{port}/"
    stop.set()
    thread.join(10)


def test_page_loads_curves_have_points_and_a_session_opens(dashboard_url, tmp_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1280, "height": 1400})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        page.goto(dashboard_url)
        page.wait_for_selector("body[data-loaded]")
        page.wait_for_function("document.querySelectorAll('#chart-reward circle.point').length >= 6")
        assert page.locator("#chart-reward circle.point").count() == 6  # steps 1..6
        assert page.locator("#chart-eval circle.point[data-series='eval/accuracy']").count() == 3  # versions 1..3
        assert page.locator("#chart-throughput circle.point").count() >= 6
        for figure in ("mismatch_abs_mean", "stale_abs_mean", "mismatch_kl"):  # steps 1..6
            assert page.locator(f"#chart-mismatch circle.point[data-series='train/{figure}']").count() == 6
        assert page.locator("#chart-mismatch text.threshold-label").text_content() == "trainer.mismatch_warn 0.05"
        assert page.locator("#timeline rect.kind-train").count() >= 1  # rollout-1 lent to the trainer
        assert "role switches" in page.locator("#bubble").inner_text()
        assert "trainer-0" in page.locator("#resources").inner_text()

        page.locator("#sessions tr.session-row", has_text="forked").click()
        page.wait_for_selector("#session-view .turn")
        view = page.locator("#session-view")
        assert "2 turns · 1 forks" in view.locator(".session-title").inner_text()
        assert view.locator(".turn-meta.fork").count() == 1
        assert [t.strip() for t in view.locator(".version").all_inner_texts()] == ["⟨v1⟩", "⟨v2⟩"]
        assert view.locator(".gen").count() == 4  # 2 + 2 generated tokens
        assert "logprob -0.250" in (view.locator(".gen").first.get_attribute("title") or "")
        page.screenshot(path=str(os.environ.get("DASHBOARD_SCREENSHOT", tmp_path / "dashboard.png")), full_page=True)
        browser.close()
    assert errors == []


def test_an_adapters_stack_page_shows_every_teams_reward_and_eval_at_once(settings, codec, monkeypatch):
    from playwright.sync_api import sync_playwright

    settings = adapter_stack(settings)  # red and blue each train their adapter
    create_eval_topic(settings)
    with monkeypatch.context() as patch:  # each team's trainer reports its mismatch
        patch.setattr(tracking_records, "trainer_status", trainer_status_with_mismatch)
        publish_team_run(settings, codec, steps=4)
    dashboard, stop, port = Dashboard(settings), threading.Event(), free_port()
    thread = threading.Thread(target=lambda: asyncio.run(serve(dashboard, "127.0.0.1", port, stop)), daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and sum(len(e) for e in dashboard.state.team_evals.values()) < 4:
            time.sleep(0.2)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 1400})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.goto(f"http://127.0.0.1:{port}/")
            page.wait_for_function("document.querySelectorAll(\"#chart-eval circle.point\").length >= 4")
            for team in ("red", "blue"):
                assert page.locator(f"#chart-reward circle.point[data-series='train/{team}/reward_mean']").count() == 4
                assert page.locator(f"#chart-eval circle.point[data-series='eval/{team}/accuracy']").count() == 2
                mismatch = f"#chart-mismatch circle.point[data-series='train/{team}/mismatch_abs_mean']"
                assert page.locator(mismatch).count() == 4
            assert "red step 4" in page.locator("#step").inner_text()
            assert "trainer-0-blue (blue's adapter)" in page.locator("#resources").inner_text()
            browser.close()
        assert errors == []
    finally:
        stop.set()
        thread.join(10)

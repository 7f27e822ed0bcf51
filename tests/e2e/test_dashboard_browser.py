"""GET /dashboard in a real headless browser (Debian's chromium driven by Playwright) against a
real training server, with a real prediction server reporting to it.

An empty trainer first, then three retrains, one that fails and one that recovers: the page
must show each at its next refresh (charts, the trainer's version, the failure streak, the
prediction servers) and never log an error.
The last state is saved as test-artifacts/dashboard.png.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from advisor.report import write_document
from devkit.processes import ServerProcess, free_port
from devkit.synthetic import synthetic_rows

CHROMIUM = "/usr/bin/chromium"
SKIP_BROWSER = os.environ.get("LATENCY_TEST_SKIP_BROWSER") == "1"
ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
CHARTS = 6  # MAE, RMSE, pinball loss, coverage, samples, duration
# The page refreshes every 5 s: several refreshes, as a loaded CI machine may need.
REFRESH_WAIT_MS = 30_000
# Every wait_for_function predicate is an arrow function: a bare expression is eval'd in
# the page at each poll, which the page's own CSP (no 'unsafe-eval') rightly refuses.


def installed_chromium() -> str | None:
    return CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium")


def install_debian_chromium() -> None:
    """Debian's chromium package (Playwright drives it; no browser download), when we may."""
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        return
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", "chromium"]):
        subprocess.run(command, env=env, check=False, capture_output=True, timeout=900)


@pytest.fixture
def servers(tmp_path: Path) -> Iterator[tuple[ServerProcess, ServerProcess]]:
    env = {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_N_ESTIMATORS": "10",
        "LATENCY_MIN_SAMPLES_FOR_RETRAIN": "50",
        "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
        "LATENCY_EARLY_RETRAINS": "false",  # the test retrains with POST /retrain
    }
    trainer = ServerProcess("training_server", free_port(), env, tmp_path / "training.log")
    predictor = ServerProcess(
        "prediction_server",
        free_port(),
        {
            **env,
            "TRAINING_SERVER_URL": trainer.url,
            "MODEL_SYNC_INTERVAL_SEC": "1",
            "LATENCY_WORKERS": "1",
        },
        tmp_path / "prediction.log",
    )
    try:
        yield trainer.start(), predictor.start()
    finally:
        predictor.stop()
        trainer.stop()


def retrain(trainer: ServerProcess, seed: int) -> str:
    rows = {"entries": synthetic_rows(300, seed=seed)}
    response = httpx.post(f"{trainer.url}/add_training_data_bulk", json=rows, timeout=30)
    assert response.status_code == 202, response.text
    outcome: str = httpx.post(f"{trainer.url}/retrain", timeout=60).json()["outcome"]
    return outcome


def failing_retrain(trainer: ServerProcess, model_dir: Path) -> None:
    """A real publish failure: a file where the versions directory must be."""
    versions, aside = model_dir / "versions", model_dir / "versions.aside"
    versions.rename(aside)
    versions.write_text("not a directory")
    try:
        assert retrain(trainer, seed=4) == "failed"
    finally:
        versions.unlink()
        aside.rename(versions)


def model_version(trainer: ServerProcess) -> str:
    version: str = httpx.get(f"{trainer.url}/data/status", timeout=10).json()["model_version"]
    return version


def test_dashboard_charts_every_retrain_live(
    chromium_path: str, servers: tuple[ServerProcess, ServerProcess], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright  # a dev extra: only this test needs it

    trainer, predictor = servers
    # The last `latency-predictor advise --json` answer, where the trainer looks by default.
    advice = {"verdict": "enable", "confidence": "high", "reason": "shorter queues", "rows": 5000}
    write_document(tmp_path / "models" / "advice.json", {**advice, "minutes": 30.0})
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=chromium_path, headless=True, timeout=30_000
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(REFRESH_WAIT_MS)
            page.on(
                "console",
                lambda m: (
                    problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))

            def wait_for_points(n: int) -> None:
                page.wait_for_function(
                    "n => document.querySelectorAll(`svg[data-points='${n}']`).length === "
                    f"{CHARTS}",
                    arg=n,
                )

            page.goto(f"{trainer.url}/dashboard", timeout=30_000)
            wait_for_points(0)  # nothing trained yet
            page.wait_for_selector("#advice[data-verdict='enable'] #advice-verdict.enable")
            assert page.locator("svg >> text=no retrains yet").count() == CHARTS
            page.wait_for_function(
                "() => document.querySelector('#model-version').textContent.startsWith('none yet')"
            )
            assert page.locator("#failed tbody tr .empty").count() == 1

            for seed in (1, 2, 3):
                assert retrain(trainer, seed) == "ok"
            # Two more servers as the trainer sees them: one on an old version, one gone quiet.
            for server_id, interval in (("old-pod/1", 600.0), ("gone-pod/2", 0.1)):
                httpx.post(
                    f"{trainer.url}/prediction_servers/report",
                    timeout=5,
                    json={
                        "id": server_id,
                        "model_version": "20250101T000000.000000Z",
                        "is_ready": True,
                        "interval_s": interval,
                    },
                ).raise_for_status()
            wait_for_points(3)  # at the page's next refresh
            page.wait_for_function(
                "v => document.querySelector('#model-version').textContent === v",
                arg=model_version(trainer),
            )
            # one dot per retrain and series: 2 series in 3 charts, 4 in two, 1 in duration;
            # live coverage exists from the second retrain on (served p90s sent back: none)
            assert page.locator("#chart-mae circle").count() == 6
            assert page.locator("#chart-samples circle").count() == 12
            assert page.locator("#chart-duration circle").count() == 3
            assert page.locator("#chart-coverage line.reference").count() == 1
            assert page.locator("#failure-card.alarm").count() == 0
            page.wait_for_selector("tr[data-state='stale'][data-server-id='gone-pod/2']")
            page.wait_for_selector("tr[data-state='behind'][data-server-id='old-pod/1']")
            assert predictor.proc is not None  # the real one, reporting every second:
            page.wait_for_selector(f"tr[data-state='current'][data-server-id$='/{predictor.pid}']")

            failing_retrain(trainer, tmp_path / "models")  # the page sees it at its next refresh
            wait_for_points(4)
            page.wait_for_selector("#failure-card.alarm")
            assert "FileExistsError" in page.locator("#last-error").inner_text()
            assert page.locator(".failed-marker").count() == CHARTS
            assert page.locator("#failed tbody tr").count() == 1

            assert retrain(trainer, seed=5) == "ok"  # recovered: the streak ends
            wait_for_points(5)
            page.wait_for_function("() => !document.querySelector('#failure-card.alarm')")
            page.wait_for_function(
                "v => document.querySelector('#model-version').textContent === v",
                arg=model_version(trainer),
            )
            assert page.locator("#model-age").inner_text().endswith(" s")
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        finally:
            browser.close()
    assert problems == []

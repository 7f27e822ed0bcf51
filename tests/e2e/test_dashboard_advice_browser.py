"""The dashboard's Advice panel in a real headless browser (Debian's chromium, Playwright)
against a real training server whose LATENCY_ADVICE_FILE the test writes the way
`latency-predictor advise --json` does: no file, then each verdict, then a broken file.
The panel reads /advice on load (and every 60 s): the test reloads the page after each write.
The panel with an `enable` answer is saved as test-artifacts/dashboard-advice.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from advisor.report import write_document
from devkit.processes import ServerProcess, free_port
from tests.e2e.test_dashboard_browser import (
    ARTIFACTS,
)

# What advisor.report.document writes, cut down to what the panel shows.
ADVICE: dict[str, Any] = {
    "verdict": "enable",
    "reason": "latency-first is 12.0% faster on TTFT p90 than token-load (1,290 ms)",
    "confidence": "high",
    "confidence_reasons": [],
    "rows": 42186,
    "minutes": 11.0,
    "fit_error": None,
    "policies": {
        "token-load": {"ttft_ms": {"p50": 410.0, "p90": 1290.0}, "slo_attainment": 0.912},
        "latency-first": {"ttft_ms": {"p50": 380.0, "p90": 1135.2}, "slo_attainment": 0.957},
        "oracle": {"ttft_ms": {"p50": 350.0, "p90": 1010.0}, "slo_attainment": None},
    },
    "cost": {"prediction_workers": 1, "total_cpu_cores": 0.22},
}
NOT_ENOUGH: dict[str, Any] = {
    "verdict": "not-enough-data",
    "reason": "300 rows over 5.0 minutes: under 1,000 rows and 10 minutes",
    "confidence": "low",
    "rows": 300,
    "minutes": 5.0,
    "policies": {},
}
GREEN, GREY, AMBER = "rgb(46, 125, 50)", "rgb(102, 102, 119)", "rgb(168, 100, 0)"


@pytest.fixture
def trainer(tmp_path: Path) -> Iterator[ServerProcess]:
    env = {
        "LATENCY_DB_URL": f"sqlite:///{tmp_path / 'store.db'}",
        "LATENCY_MODEL_DIR": str(tmp_path / "models"),
        "LATENCY_ADVICE_FILE": str(tmp_path / "advice" / "pool-a.json"),
        "LATENCY_RETRAINING_INTERVAL_SEC": "3600",
        "LATENCY_EARLY_RETRAINS": "false",
    }
    server = ServerProcess("training_server", free_port(), env, tmp_path / "training.log")
    try:
        yield server.start()
    finally:
        server.stop()


def test_the_advice_panel_shows_each_state(
    chromium_path: str, trainer: ServerProcess, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright  # a dev extra: only the browser tests

    path = tmp_path / "advice" / "pool-a.json"
    problems: list[str] = []
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.set_default_timeout(20_000)
            page.on(
                "console",
                lambda m: problems.append(m.text) if m.type in ("error", "warning") else None,
            )
            page.on("pageerror", lambda e: problems.append(f"page error: {e}"))

            def panel(state: str) -> Any:
                page.wait_for_selector(f"#advice[data-state='{state}']")
                return page.locator("#advice")

            def background() -> str:
                color: str = page.eval_on_selector(
                    "#advice-verdict", "e => getComputedStyle(e).backgroundColor"
                )
                return color

            page.goto(f"{trainer.url}/dashboard")
            text = panel("missing").inner_text()
            assert " ".join(text.split()) == (
                f"No advice yet: run latency-predictor advise --db URL --pods N --json {path} "
                "(the trainer's advice file) to see it here."
            )

            write_document(path, ADVICE)
            page.reload()
            shown = panel("shown")
            assert shown.get_attribute("data-verdict") == "enable"
            assert page.inner_text("#advice-verdict") == "enable" and background() == GREEN
            assert page.inner_text("#advice-confidence") == "high"
            assert page.inner_text("#advice-traffic") == "42,186 rows over 11 min"
            assert page.inner_text("#advice-reason") == ADVICE["reason"]
            assert page.inner_text("#advice-written").endswith(" s ago)")
            cells = [
                [c.strip() for c in row.split("\t")]
                for row in page.inner_text("#advice-policies tbody").splitlines()
            ]
            assert cells == [
                ["token-load", "1,290", "91.2 %"],
                ["latency-first", "1,135", "95.7 %"],
                ["oracle", "1,010", "\u2013"],  # an en dash: no SLOs
            ]
            ARTIFACTS.mkdir(exist_ok=True)
            shown.screenshot(path=str(ARTIFACTS / "dashboard-advice.png"))

            write_document(path, {**ADVICE, "verdict": "little-gain"})
            page.reload()
            page.wait_for_selector("#advice[data-verdict='little-gain']")
            assert background() == GREY

            write_document(path, NOT_ENOUGH)
            page.reload()
            page.wait_for_selector("#advice[data-verdict='not-enough-data']")
            assert background() == AMBER
            assert page.locator("#advice-policies").count() == 0
            assert page.inner_text("#advice-traffic") == "300 rows over 5 min"

            path.write_text('{"verdict": "enable", "rea')  # not what advise writes
            page.reload()
            assert (
                panel("unreadable")
                .inner_text()
                .startswith("advice not read: HTTP 503: advice file unreadable: not valid JSON")
            )
        finally:
            browser.close()
    # Only what the missing and the broken file make the browser and the page log.
    resource = "Failed to load resource: the server responded with a status of"
    logged = "dashboard: /advice: HTTP 503: advice file unreadable: not valid JSON"
    assert problems[:2] == [f"{resource} 404 (Not Found)", f"{resource} 503 (Service Unavailable)"]
    assert len(problems) == 3 and problems[2].startswith(logged), problems

"""The dashboard's pool selector in a real headless browser (Debian's chromium driven by
Playwright) against a real training server keeping two pools trained apart: `default` (one
retrain of 600 rows) and `h200-llama` (two retrains of 200 rows each), each with advice of
its own. The selector must list both; choosing one must show that pool's figures, fetched
under its /pools/<name> prefix only, and keep it in the address (?pool=) so a link opens it.
The pool's page is saved as test-artifacts/dashboard-pool.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import httpx
import pytest

from advisor.report import write_document
from devkit.processes import ServerProcess
from devkit.synthetic import synthetic_rows
from tests.e2e.test_cli_status import server_env, started
from tests.e2e.test_dashboard_browser import (
    ARTIFACTS,
    CHARTS,
)

POOL = "h200-llama"
WAIT_MS = 20_000  # the page reads everything at once on load: no refresh to wait for


class Pool(NamedTuple):
    version: str
    train_samples: str  # as the header card shows them: "TTFT / TPOT"
    retrains: int
    verdict: str


@pytest.fixture
def trainer(tmp_path: Path) -> Iterator[ServerProcess]:
    server = started("training_server", server_env(tmp_path), tmp_path / "training.log")
    try:
        yield server
    finally:
        server.stop()


def train(base: str, rows: int, seeds: tuple[int, ...]) -> None:
    for seed in seeds:
        entries = {"entries": synthetic_rows(rows, seed=seed)}
        reply = httpx.post(f"{base}/add_training_data_bulk", json=entries, timeout=30)
        assert reply.status_code == 202, reply.text
        assert httpx.post(f"{base}/retrain", timeout=60).json()["outcome"] == "ok"


def trained_pools(trainer: ServerProcess, model_dir: Path) -> dict[str, Pool]:
    """Both pools trained, each with its own advice file; what the page must show of each."""
    bases = {"default": trainer.url, POOL: f"{trainer.url}/pools/{POOL}"}
    train(bases["default"], 600, seeds=(1,))
    # 600 rows against 400: the training split is random, so only unequal row counts make
    # the two pools' sample cards differ every run (about 540 against 360 training rows).
    train(bases[POOL], 200, seeds=(2, 3))
    verdicts = {"default": "enable", POOL: "not-enough-data"}
    for pool, folder in (("default", model_dir), (POOL, model_dir / "pools" / POOL)):
        advice = {"verdict": verdicts[pool], "confidence": "high", "reason": pool, "rows": 5000}
        write_document(folder / "advice.json", {**advice, "minutes": 30.0})
    shown = {}
    for pool, base in bases.items():
        data = httpx.get(f"{base}/data/status", timeout=10).json()
        counts = data["training_data"]
        shown[pool] = Pool(
            data["model_version"],
            f"{counts['ttft_samples']} / {counts['tpot_samples']}",
            {"default": 1, POOL: 2}[pool],
            verdicts[pool],
        )
    assert shown["default"].version != shown[POOL].version
    assert shown["default"].train_samples != shown[POOL].train_samples
    return shown


def expect_pool(page: Any, name: str, pool: Pool) -> None:
    """The page shows `pool`'s figures, with `name` chosen in the selector."""
    page.wait_for_function(
        "v => document.querySelector('#model-version').textContent === v", arg=pool.version
    )
    page.wait_for_function(
        f"n => document.querySelectorAll(`svg[data-points='${{n}}']`).length === {CHARTS}",
        arg=pool.retrains,
    )
    page.wait_for_selector(f"#advice[data-verdict='{pool.verdict}']")
    assert page.inner_text("#train-samples") == pool.train_samples
    assert page.input_value("#pool") == name


def test_the_pool_selector_switches_every_figure(
    chromium_path: str, trainer: ServerProcess, tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright  # a dev extra: only the browser tests

    pools = trained_pools(trainer, tmp_path / "models")
    problems: list[str] = []
    fetched: list[str] = []  # the paths the first page's scripts asked for, in order
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, headless=True)

        def new_page() -> Any:
            opened = browser.new_page(viewport={"width": 1400, "height": 900})
            opened.set_default_timeout(WAIT_MS)
            opened.on(
                "console",
                lambda m: (
                    problems.append(f"console {m.type}: {m.text}")
                    if m.type in ("error", "warning")
                    else None
                ),
            )
            opened.on("pageerror", lambda e: problems.append(f"page error: {e}"))
            return opened

        try:
            page = new_page()
            page.on(
                "request",
                lambda r: (
                    fetched.append(urlsplit(r.url).path) if r.resource_type == "fetch" else None
                ),
            )
            page.goto(f"{trainer.url}/dashboard")
            page.wait_for_function("() => document.querySelectorAll('#pool option').length === 2")
            options = page.eval_on_selector_all("#pool option", "os => os.map((o) => o.value)")
            assert options == ["default", POOL]
            expect_pool(page, "default", pools["default"])
            assert all(not p.startswith(f"/pools/{POOL}") for p in fetched), fetched

            fetched.clear()
            page.select_option("#pool", POOL)  # opens the page again, on the pool
            page.wait_for_url(f"{trainer.url}/dashboard?pool={POOL}")
            expect_pool(page, POOL, pools[POOL])
            assert fetched, "the pool's page fetched nothing"
            outside = [p for p in fetched if p != "/pools" and not p.startswith(f"/pools/{POOL}/")]
            assert outside == [], f"fetched outside the pool's prefix: {outside}"
            assert f"/pools/{POOL}/advice" in fetched and f"/pools/{POOL}/retrains" in fetched
            ARTIFACTS.mkdir(exist_ok=True)
            page.screenshot(path=str(ARTIFACTS / "dashboard-pool.png"), full_page=True)

            link = new_page()  # the address as a link: the same pool
            link.goto(f"{trainer.url}/dashboard?pool={POOL}")
            expect_pool(link, POOL, pools[POOL])
            link.goto(f"{trainer.url}/pools/{POOL}/dashboard")  # the page under the prefix
            expect_pool(link, POOL, pools[POOL])
            link.goto(f"{trainer.url}/dashboard?pool=Not_A_Pool")  # no such name: default
            expect_pool(link, "default", pools["default"])

            page.select_option("#pool", "default")  # and back: the unprefixed routes
            page.wait_for_url(f"{trainer.url}/dashboard")
            expect_pool(page, "default", pools["default"])
        finally:
            browser.close()
    assert problems == []

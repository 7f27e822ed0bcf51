"""GET /dashboard: one self-contained page that reads only this server's own routes.
(tests/e2e/test_dashboard_browser.py runs it in a real browser.)"""

from __future__ import annotations

import re

from fastapi.testclient import TestClient

# Everything the page fetches, every refresh.
PAGE_SOURCES = ("/retrains?limit=200", "/data/status", "/prediction_servers")


def test_dashboard_is_one_html_page(client: TestClient) -> None:
    response = client.get("/dashboard")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.text.lstrip().lower().startswith("<!doctype html>")
    assert "<script>" in response.text and "<style>" in response.text


def test_dashboard_loads_nothing_from_other_hosts(client: TestClient) -> None:
    response = client.get("/dashboard")
    page = response.text
    assert re.findall(r"https?://", page) == []
    assert re.findall(r"//[a-z0-9.-]+\.[a-z]{2,}", page, re.IGNORECASE) == []  # no //cdn.host
    assert not re.search(r"<script[^>]*\bsrc=", page)
    assert not re.search(r"<link[^>]*stylesheet", page)
    assert "@import" not in page and "@font-face" not in page
    # and the browser is told to refuse anything else anyway
    policy = response.headers["content-security-policy"]
    assert "default-src 'none'" in policy and "connect-src 'self'" in policy


def test_what_the_page_fetches_exists_on_an_empty_trainer(client: TestClient) -> None:
    page = client.get("/dashboard").text
    assert "`/retrains?limit=${RETRAINS_SHOWN}`" in page and "RETRAINS_SHOWN = 200" in page
    for path in PAGE_SOURCES:
        assert path.split("?")[0] in page
        response = client.get(path)
        assert response.status_code == 200, path
    assert client.get("/retrains?limit=200").json()["retrains"] == []
    assert client.get("/prediction_servers").json() == {
        "current_version": None,
        "current_version_created_at": None,
        "servers": [],
    }


def test_every_chart_exposes_its_point_count(client: TestClient) -> None:
    page = client.get("/dashboard").text
    assert 'data-points="${retrains.length}"' in page
    for chart in ("mae", "rmse", "pinball", "coverage", "samples", "duration"):
        assert f'id: "{chart}"' in page

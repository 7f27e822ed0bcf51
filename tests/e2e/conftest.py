"""Fixtures the end-to-end tests share: the browser, and a trainer with two prediction
servers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.e2e.cluster import Cluster, running_cluster
from tests.e2e.test_dashboard_browser import (
    CHROMIUM,
    SKIP_BROWSER,
    install_debian_chromium,
    installed_chromium,
)


@pytest.fixture(scope="module")
def chromium_path() -> str:
    if SKIP_BROWSER:
        pytest.skip("LATENCY_TEST_SKIP_BROWSER=1")
    if installed_chromium() is None:
        install_debian_chromium()
    path = installed_chromium()
    if path is None:
        pytest.fail(
            f"no chromium at {CHROMIUM} or on PATH, and it could not be installed here (that "
            "needs root and apt-get): run `sudo apt-get install chromium` (Debian/Ubuntu), or "
            "set LATENCY_TEST_SKIP_BROWSER=1 to skip this test knowingly"
        )
    return path


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    """A trainer and two prediction servers, one reading its directory, one mirroring."""
    yield from running_cluster(tmp_path)

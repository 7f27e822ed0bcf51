"""The prediction server's side of bench_replicas: how long after each publication a
watched pool's new version was first served, and whether it ever served an older version
after a newer one."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import httpx
import numpy as np

from benchmarks.common import say


def figures(values: list[float]) -> str:
    """Seconds as p50 / p90 / max (the lags here, and bench_replicas' retrain gaps)."""
    if not values:
        return "none"
    p50, p90 = np.percentile(values, [50, 90])
    return f"p50 {p50:.1f} s, p90 {p90:.1f} s, max {max(values):.1f} s ({len(values)} gaps)"


class ServedWatch:
    """Polls the prediction server's status of a few pools; keeps when each version was
    first served, and counts a version served after a newer one."""

    def __init__(self, url: str, pools: list[str]):
        self.url, self.pools = url, pools
        self.first_seen: dict[tuple[str, str], datetime] = {}
        self.went_back = 0
        self._newest: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def start(self) -> ServedWatch:
        self._thread.start()
        return self

    def _poll(self) -> None:
        with httpx.Client(timeout=5) as client:
            while not self._stop.wait(0.25):  # until close(); a few pools every 250 ms
                for pool in self.pools:
                    try:
                        version = client.get(f"{self.url}/pools/{pool}/status").json()[
                            "model_version"
                        ]
                    except (httpx.HTTPError, ValueError, KeyError):
                        continue
                    if not version or version == "cold-start-prior":
                        continue
                    if version < self._newest.get(pool, ""):
                        self.went_back += 1
                    self._newest[pool] = max(version, self._newest.get(pool, ""))
                    self.first_seen.setdefault((pool, version), datetime.now(UTC))

    def close(self) -> None:
        self._stop.set()
        self._thread.join(10)


def served_lag(rows: list[tuple[str, datetime, str, str]], watch: ServedWatch) -> None:
    """Seconds from each watched publication (its retrain's record) to the first time the
    prediction server served it; versions never served before a newer one count apart."""
    published = {(pool, version): when for pool, when, _, version in rows}
    lags = [
        (seen - published[key]).total_seconds()
        for key, seen in watch.first_seen.items()
        if key in published
    ]
    watched = {key for key in published if key[0] in watch.pools}
    say(
        f"prediction server, {len(watch.pools)} pools watched: {len(lags)} of {len(watched)} "
        f"versions served, after publication {figures(lags)}; served an older version "
        f"after a newer one: {watch.went_back} times"
    )

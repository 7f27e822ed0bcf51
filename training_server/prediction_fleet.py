"""PredictionFleet: the prediction servers that reported to this trainer, in memory.

Each prediction server (each worker process) reports the version it serves every model-sync
interval. Only the latest report per id is kept, at most `max_entries` of them: the one
seen longest ago is dropped first, so ids of restarted pods cannot grow it without bound.
Not shared between training replicas: each lists the reports that reached it.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass
from datetime import datetime

MAX_PREDICTION_SERVERS = 1_000
# A server that did not say how often it reports is stale after this long unseen.
DEFAULT_STALE_AFTER_S = 30.0
# One that did is stale after missing this many reports in a row.
MISSED_REPORTS_FOR_STALE = 3


@dataclass(frozen=True)
class ServerReport:
    id: str
    model_version: str
    loaded_at: datetime | None
    is_ready: bool
    interval_s: float | None = None

    def stale_after_s(self) -> float:
        if self.interval_s is None:
            return DEFAULT_STALE_AFTER_S
        return MISSED_REPORTS_FOR_STALE * self.interval_s


@dataclass(frozen=True)
class SeenServer:
    report: ServerReport
    last_seen: float  # time.time() when the report arrived

    def seen_ago_s(self, now: float) -> float:
        return max(0.0, now - self.last_seen)

    def is_stale(self, now: float) -> bool:
        return self.seen_ago_s(now) > self.report.stale_after_s()


class PredictionFleet:
    """Not thread-safe: the routes that use it run on the event loop, one at a time."""

    def __init__(self, max_entries: int = MAX_PREDICTION_SERVERS):
        self.max_entries = max_entries
        self._servers: OrderedDict[str, SeenServer] = OrderedDict()  # oldest seen first

    def __len__(self) -> int:
        return len(self._servers)

    def record(self, report: ServerReport) -> None:
        self._servers[report.id] = SeenServer(report, time.time())
        self._servers.move_to_end(report.id)
        while len(self._servers) > self.max_entries:
            self._servers.popitem(last=False)

    def newest_first(self) -> list[SeenServer]:
        return list(reversed(self._servers.values()))

"""FleetReporter: tells the training server which bundle this worker serves.

Called by the model watcher once per model-sync interval (POST /prediction_servers/report),
or, for a pool fed by the trainer's listing, when its version changes and once per
watcher.FULL_SYNC_INTERVALS.
Best effort: a trainer that is down, slow or older than this server costs a counted,
logged miss and a short timeout, never a request or a model swap.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import httpx

from prediction_server.metrics import PredictionMetrics
from shared.predictor import LoadedBundle
from shared.schemas import PredictionServerReport
from shared.settings import PredictionSettings
from shared.tokens import TokenAuth

log = logging.getLogger(__name__)
REPORT_PATH = "/prediction_servers/report"
# Short: the watcher waits for the report before its next model poll.
REPORT_TIMEOUT_S = 2.0


def worker_id() -> str:
    """hostname/pid: the pod name in Kubernetes, and each uvicorn worker apart. Not the
    port: worker processes rebuild their settings from the environment, without --port."""
    return f"{socket.gethostname()}/{os.getpid()}"


class FleetReporter:
    def __init__(
        self, client: httpx.AsyncClient, settings: PredictionSettings, metrics: PredictionMetrics
    ):
        self.client, self.settings, self.metrics = client, settings, metrics
        self.id = worker_id()
        self._failing = False  # warn once per outage, not at every interval

    @classmethod
    @asynccontextmanager
    async def open(
        cls, settings: PredictionSettings, metrics: PredictionMetrics
    ) -> AsyncIterator[FleetReporter | None]:
        """A reporter with its own HTTP client, or None when no trainer URL is set."""
        if not settings.training_server_url:
            yield None
            return
        async with httpx.AsyncClient(
            base_url=settings.training_server_url,
            timeout=REPORT_TIMEOUT_S,
            auth=TokenAuth(settings),
        ) as client:
            yield cls(client, settings, metrics)

    def body(self, bundle: LoadedBundle, every_s: float | None = None) -> PredictionServerReport:
        return PredictionServerReport(
            id=self.id,
            model_version=bundle.version,
            loaded_at=None if bundle.is_prior else bundle.loaded_at,
            is_ready=True,  # this server answers from its first request on (the prior)
            interval_s=every_s or self.settings.model_sync_interval_sec,
        )

    async def report(self, bundle: LoadedBundle, every_s: float | None = None) -> bool:
        """True when the trainer recorded the report. `every_s`: how often this worker
        reports (the trainer calls it stale after missing three); the sync interval when
        not given."""
        try:
            report = self.body(bundle, every_s).model_dump(mode="json")
            (await self.client.post(REPORT_PATH, json=report)).raise_for_status()
        except httpx.HTTPError as exc:
            self.metrics.fleet_report_errors.inc()
            level = logging.DEBUG if self._failing else logging.WARNING
            log.log(
                level, "version report to %s failed: %s", self.settings.training_server_url, exc
            )
            self._failing = True
            return False
        if self._failing:
            log.info("version reports to %s work again", self.settings.training_server_url)
        self._failing = False
        return True

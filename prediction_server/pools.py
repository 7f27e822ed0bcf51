"""ServedPools: the named pools a prediction server serves, beside its default pool.

Each named pool is a slot, a ModelWatcher and metrics of its own, built from the default
pool's settings with the pool's model directory (<model_dir>/pools/<name>) and, when the
server knows the trainer, the pool's trainer URL (<TRAINING_SERVER_URL>/pools/<name>), so
the watcher mirrors and reports exactly as the default pool's does. Pools are found on
every sync interval: in the shared model directory, or from the trainer's GET /pools when
bundles are mirrored. A pool not found yet answers from the cold-start prior, as a fresh
server does; at most LATENCY_MAX_POOLS pools are served (the default counts).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import httpx
from prometheus_client import CollectorRegistry

from prediction_server.metrics import PredictionMetrics
from prediction_server.watcher import ModelWatcher, lower_priority
from shared.model_source import ModelSource
from shared.pools import DEFAULT_POOL, POOL_NAME, pool_dirs, pool_model_dir
from shared.predictor import LoadedBundle, prior_bundle
from shared.settings import PredictionSettings
from shared.slot import BundleSlot
from shared.tokens import TokenAuth

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServedPool:
    name: str
    settings: PredictionSettings
    slot: BundleSlot
    metrics: PredictionMetrics
    watcher: ModelWatcher
    task: asyncio.Task[None]


def pool_settings(settings: PredictionSettings, pool: str) -> PredictionSettings:
    """The default pool's settings, pointed at `pool`'s directory and trainer routes."""
    url = settings.training_server_url
    return settings.model_copy(
        update={
            "model_dir": pool_model_dir(settings.model_dir, pool),
            "training_server_url": f"{url.rstrip('/')}/pools/{pool}" if url else None,
        }
    )


class ServedPools:
    def __init__(self, settings: PredictionSettings, default: ModelWatcher):
        self.settings = settings
        self.default = default
        self.prior = BundleSlot(
            prior_bundle(settings.model_type, settings.objective_type, settings.quantile_alpha)
        )
        self.pools: dict[str, ServedPool] = {}
        # One low-priority loader thread for every named pool's bundles.
        self._loads = ThreadPoolExecutor(1, "pool-watchers", initializer=lower_priority)
        self._trainer: httpx.AsyncClient | None = None
        self._failing = False

    def serving(self, pool: str) -> LoadedBundle:
        served = self.pools.get(pool)
        return (served.slot if served is not None else self.prior).serving

    def metric_registries(self) -> dict[str, CollectorRegistry]:
        named = {name: p.metrics.registry for name, p in list(self.pools.items())}
        return {DEFAULT_POOL: self.default.metrics.registry, **named}

    def open(self) -> None:
        """Start the HTTP client that asks the trainer for its pools (mirroring only)."""
        s = self.settings
        if s.model_source is ModelSource.TRAINER_SYNC and s.training_server_url:
            self._trainer = httpx.AsyncClient(
                base_url=s.training_server_url, timeout=10.0, auth=TokenAuth(s)
            )

    async def close(self) -> None:
        for served in list(self.pools.values()):
            served.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await served.task
            await served.watcher.close()
        self._loads.shutdown(wait=False, cancel_futures=True)
        if self._trainer is not None:
            await self._trainer.aclose()

    async def _published_pools(self) -> list[str]:
        if self._trainer is None:
            return list(pool_dirs(self.settings.model_dir))
        reply = await self._trainer.get("/pools")
        if reply.status_code == 404:  # a trainer from before pools: its one pool is ours
            return []
        listed = reply.raise_for_status().json()["pools"]
        return [str(p["name"]) for p in listed]

    async def discover(self) -> list[str]:
        """Start serving every pool published since the last look; returns their names."""
        found = [
            name
            for name in await self._published_pools()
            if name != DEFAULT_POOL and POOL_NAME.fullmatch(name) and name not in self.pools
        ]
        started = []
        for name in found:
            if len(self.pools) + 1 >= self.settings.max_pools:
                log.warning(
                    "pool %s not served: LATENCY_MAX_POOLS=%d reached",
                    name,
                    self.settings.max_pools,
                )
                break
            await self._start(name)
            started.append(name)
        return started

    async def _start(self, name: str) -> None:
        settings = pool_settings(self.settings, name)
        settings.model_dir.mkdir(parents=True, exist_ok=True)  # a mirror writes into it
        slot = BundleSlot(self.prior.serving)
        metrics = PredictionMetrics(slot)
        watcher = ModelWatcher(settings, slot, metrics, loads=self._loads)
        watcher.open()
        await watcher.reload()  # serve its bundle from the first request on
        task = asyncio.create_task(watcher.run(), name=f"model-watcher-{name}")
        self.pools[name] = ServedPool(name, settings, slot, metrics, watcher, task)
        log.info("serving pool %s (%s)", name, slot.serving.version)

    async def run(self) -> None:
        """Look for new pools every sync interval, until cancelled."""
        while True:
            try:
                await self.discover()
                self._failing = False
            except (httpx.HTTPError, ValueError, KeyError, OSError) as exc:
                # Once per outage: the watchers' own sync warnings tell the rest.
                log.log(
                    logging.DEBUG if self._failing else logging.WARNING,
                    "pool discovery failed: %s",
                    exc,
                )
                self._failing = True
            await asyncio.sleep(self.settings.model_sync_interval_sec)

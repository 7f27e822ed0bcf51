"""ServedPools: the prediction server's one table from a pool's name to what serves it.

Every pool, `default` included, is a ServedPool: its settings, slot, ModelWatcher and
metrics. The default pool is built at start-up from the server's own settings; a named pool
from the same settings pointed at its model directory (<model_dir>/pools/<name>) and, when
the server knows the trainer, at the pool's trainer URL (<TRAINING_SERVER_URL>/pools/<name>),
so its watcher mirrors and reports exactly as the default pool's does. Named pools are found
on every sync interval: in the shared model directory, or from the trainer's GET /pools when
bundles are mirrored. That listing also carries each pool's newest version and live
calibration (`?calibration=true`), which feed every served pool's watcher (watcher.
follow_listing): one request per interval for every pool, instead of a few per pool.
`resolve` is the one lookup the routes use: a pool not found yet is a vacant view
answering from the cold-start prior, as a fresh server does (no watcher, and its calls
counted under the default pool's series, so made-up names add none). At most
LATENCY_MAX_POOLS pools are served, the default counting.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import httpx
from prometheus_client import CollectorRegistry

from prediction_server.metrics import PredictionMetrics
from prediction_server.watcher import ModelWatcher, lower_priority
from shared.live_calibration import LiveCalibration
from shared.model_source import ModelSource
from shared.pools import DEFAULT_POOL, POOL_NAME, pool_dirs, pool_model_dir, pool_url
from shared.settings import PredictionSettings
from shared.slot import BundleSlot, prior_slot
from shared.tokens import TokenAuth

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ListedPool:
    """One pool as the trainer's GET /pools lists it. `listed`: the trainer gave its
    version and live calibration (a trainer from before `?calibration=true` does not)."""

    name: str
    version: str | None = None
    calibration: bytes | None = None  # the live calibration file's content; None: none
    listed: bool = False


def listed_pool(entry: dict[str, Any]) -> ListedPool:
    name = str(entry["name"])
    if "live_calibration" not in entry:
        return ListedPool(name)
    doc = entry["live_calibration"]
    # Written as the trainer writes its own file, so that equal documents are equal bytes.
    data = (
        None
        if doc is None
        else LiveCalibration.model_validate(doc).model_dump_json(indent=2).encode()
    )
    version = entry.get("model_version")
    return ListedPool(name, str(version) if version else None, data, True)


@dataclass(frozen=True)
class ServedPool:
    name: str
    settings: PredictionSettings  # the pool's model directory and trainer URL
    slot: BundleSlot
    metrics: PredictionMetrics
    watcher: ModelWatcher | None  # None: a pool not served yet (the prior answers)


def pool_settings(settings: PredictionSettings, pool: str) -> PredictionSettings:
    """The server's settings, pointed at `pool`'s directory and trainer routes."""
    if pool == DEFAULT_POOL:
        return settings
    url = settings.training_server_url
    return settings.model_copy(
        update={
            "model_dir": pool_model_dir(settings.model_dir, pool),
            "training_server_url": pool_url(url, pool) if url else None,
        }
    )


class ServedPools:
    def __init__(self, settings: PredictionSettings):
        self.settings = settings
        self.prior = prior_slot(settings)  # what a pool not served yet answers with
        slot = prior_slot(settings)
        metrics = PredictionMetrics(slot)
        metrics.served(slot.serving.version, None)
        # The default pool's watcher loads in a thread of its own, as a single-pool server's.
        watcher = ModelWatcher(settings, slot, metrics)
        self.default = ServedPool(DEFAULT_POOL, settings, slot, metrics, watcher)
        self.pools: dict[str, ServedPool] = {DEFAULT_POOL: self.default}
        self._tasks: dict[str, asyncio.Task[None]] = {}
        # One low-priority loader thread for every named pool's bundles.
        self._loads = ThreadPoolExecutor(1, "pool-watchers", initializer=lower_priority)
        self._trainer: httpx.AsyncClient | None = None
        self._failing = False

    def resolve(self, name: str) -> ServedPool:
        """The pool `name` as served; a vacant view answering from the prior when it is
        not served (yet)."""
        served = self.pools.get(name)
        if served is not None:
            return served
        return ServedPool(
            name, pool_settings(self.settings, name), self.prior, self.default.metrics, None
        )

    def metric_registries(self) -> dict[str, CollectorRegistry]:
        return {name: p.metrics.registry for name, p in list(self.pools.items())}

    async def start(self) -> None:
        """Serve the default pool's published bundle and every published pool's from the
        first request on, then watch them (call on the event loop)."""
        s, watcher = self.settings, self.default.watcher
        assert watcher is not None
        watcher.open()
        if s.model_source is ModelSource.TRAINER_SYNC and s.training_server_url:
            self._trainer = httpx.AsyncClient(
                base_url=s.training_server_url, timeout=10.0, auth=TokenAuth(s)
            )
        await watcher.check()  # what the shared directory already holds; run() mirrors
        self._tasks[DEFAULT_POOL] = asyncio.create_task(watcher.run(), name="model-watcher")
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, OSError):
            await self.discover()  # a trainer away: the next look finds them
        self._tasks["pool-discovery"] = asyncio.create_task(self._run(), name="pool-discovery")

    async def close(self) -> None:
        for task in list(self._tasks.values()):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for served in list(self.pools.values()):
            if served.watcher is not None:
                await served.watcher.close()
        self._loads.shutdown(wait=False, cancel_futures=True)
        if self._trainer is not None:
            await self._trainer.aclose()

    async def _published_pools(self) -> list[ListedPool]:
        if self._trainer is None:
            return [ListedPool(name) for name in pool_dirs(self.settings.model_dir)]
        reply = await self._trainer.get("/pools", params={"calibration": "true"})
        if reply.status_code == 404:  # a trainer from before pools: its one pool is ours
            return []
        return [listed_pool(p) for p in reply.raise_for_status().json()["pools"]]

    async def discover(self) -> list[str]:
        """Start serving every pool published since the last look, and feed the served
        pools' watchers what the trainer listed; returns the names of the new pools."""
        listing = [p for p in await self._published_pools() if POOL_NAME.fullmatch(p.name)]
        found = [p.name for p in listing if p.name not in self.pools]
        started = []
        for name in found:
            if len(self.pools) >= self.settings.max_pools:
                log.warning(
                    "pool %s not served: LATENCY_MAX_POOLS=%d reached",
                    name,
                    self.settings.max_pools,
                )
                break
            await self._serve(name)
            started.append(name)
        self._feed(listing)
        return started

    def _feed(self, listing: list[ListedPool]) -> None:
        """Hand each served pool's watcher (the default pool's too: the listing names it)
        its listed version and calibration; the watchers act on them in their own loops."""
        for entry in listing:
            served = self.pools.get(entry.name)
            if served is None or served.watcher is None:
                continue
            if entry.listed:
                served.watcher.follow_listing(entry.version, entry.calibration)
            else:  # a trainer that lists no calibration (rolled back): poll as before
                served.watcher.listed = False

    async def _serve(self, name: str) -> None:
        settings = pool_settings(self.settings, name)
        settings.model_dir.mkdir(parents=True, exist_ok=True)  # a mirror writes into it
        slot = BundleSlot(self.prior.serving)
        metrics = PredictionMetrics(slot)
        watcher = ModelWatcher(settings, slot, metrics, loads=self._loads)
        watcher.open()
        await watcher.reload()  # serve its bundle from the first request on
        self._tasks[name] = asyncio.create_task(watcher.run(), name=f"model-watcher-{name}")
        self.pools[name] = ServedPool(name, settings, slot, metrics, watcher)
        log.info("serving pool %s (%s)", name, slot.serving.version)

    async def _run(self) -> None:
        """Look for new pools every sync interval, until cancelled."""
        while True:
            await asyncio.sleep(self.settings.model_sync_interval_sec)
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

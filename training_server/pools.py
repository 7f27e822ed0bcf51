"""PoolRegistry: the pools one training server keeps, each a PoolRuntime of its own.

A pool's runtime holds what a single-pool trainer holds: its settings (with the pool's own
model directory), its view of the one store (SampleStore confined to the pool), the slot
it serves from, its metrics, its retrainer and live calibration, and the prediction
servers that report to it. The retrains of every pool run in one thread
(retrain.pools_loop), each pool on its own schedule; the leadership among training
replicas is one lock for all pools.

A pool comes into being with its first accepted rows (or a bundle imported into it), up to
LATENCY_MAX_POOLS; at start-up every pool the store or the model directory knows is opened
again. A read of a pool that does not exist answers as a fresh service does (no rows, the
prior) from a vacant runtime, which is not kept: reads never use up the pool limit.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from shared.artifact import BundleError
from shared.live_calibration import remove_live_calibration
from shared.pools import DEFAULT_POOL, pool_dirs, pool_model_dir
from shared.predictor import LoadedBundle, load_current_bundle
from shared.settings import LegacyArtifacts, TrainingSettings
from shared.slot import BundleSlot
from training_server.leadership import Leadership
from training_server.legacy.files import publish_prior_files
from training_server.metrics import TrainingMetrics
from training_server.prediction_fleet import PredictionFleet
from training_server.retrain.live_factor import LiveCalibrator
from training_server.retrain.loop import Retrainer, trainer_slot
from training_server.store import SampleStore

log = logging.getLogger(__name__)


class PoolLimitError(Exception):
    """A new pool past LATENCY_MAX_POOLS."""


@dataclass(frozen=True)
class PoolRuntime:
    name: str
    settings: TrainingSettings  # model_dir: the pool's own
    store: SampleStore
    slot: BundleSlot
    metrics: TrainingMetrics
    retrainer: Retrainer
    calibrator: LiveCalibrator
    fleet: PredictionFleet


def _serve_published(slot: BundleSlot, settings: TrainingSettings) -> BundleSlot:
    """`slot`, serving the pool's published bundle when there is one (else the prior)."""
    try:
        published = load_current_bundle(settings.model_dir)
    except BundleError:
        log.exception(
            "the bundle published in %s is unusable; the next retrain replaces it",
            settings.model_dir,
        )
        published = None
    if published is not None:
        slot.publish(published)
    return slot


class PoolRegistry:
    def __init__(
        self,
        settings: TrainingSettings,
        store: SampleStore,
        leadership: Leadership,
        default_slot: BundleSlot,
        default_metrics: TrainingMetrics,
    ):
        """`store` is the default pool's; `default_slot` and `default_metrics` are the
        ones create_app made (app.state keeps them for the unprefixed routes)."""
        self.settings = settings
        self.leadership = leadership
        self._store = store
        self._lock = threading.Lock()
        self._pools: dict[str, PoolRuntime] = {}
        self.default_prior = trainer_slot(settings)  # what a pool with no model answers
        self.default = self._build(DEFAULT_POOL, default_slot, default_metrics)
        self._pools[DEFAULT_POOL] = self.default
        self.added = threading.Event()  # set when a pool is added (wakes the loop)

    @property
    def max_pools(self) -> int:
        return self.settings.max_pools

    def _pool_settings(self, name: str) -> TrainingSettings:
        """The service's settings with the pool's own model directory."""
        return self.settings.model_copy(
            update={"model_dir": pool_model_dir(self.settings.model_dir, name)}
        )

    def _build(
        self, name: str, slot: BundleSlot | None = None, metrics: TrainingMetrics | None = None
    ) -> PoolRuntime:
        """A pool's runtime, resumed from the store and its model directory."""
        settings = self._pool_settings(name)
        store = self._store if name == DEFAULT_POOL else self._store.for_pool(name)
        slot = _serve_published(slot or trainer_slot(settings), settings)
        metrics = metrics or TrainingMetrics()
        retrainer = Retrainer(settings, store, metrics, slot, self.leadership)
        calibrator = LiveCalibrator(settings, store, metrics, slot, lambda: retrainer.is_leader)
        if settings.legacy_artifacts is not LegacyArtifacts.NONE:
            # llm-d prediction servers are ready only with a model: the prior's, until then.
            publish_prior_files(settings)
        if not calibrator.enabled:  # a file left by an adaptive run must not keep correcting
            remove_live_calibration(settings.model_dir)
        retrainer.resume()
        return PoolRuntime(
            name, settings, store, slot, metrics, retrainer, calibrator, PredictionFleet()
        )

    def discover(self) -> list[str]:
        """Open every pool the store or the model directory knows (start-up); the limit
        does not refuse pools that already hold data. Returns the names opened."""
        known = set(self._store.stored_pools()) | set(pool_dirs(self.settings.model_dir))
        opened = []
        for name in sorted(known - {DEFAULT_POOL}):
            with self._lock:
                if name not in self._pools:
                    self._pools[name] = self._build(name)
                    opened.append(name)
        if len(self._pools) > self.max_pools:
            log.warning(
                "%d pools exist, over LATENCY_MAX_POOLS=%d: no new pool is accepted",
                len(self._pools),
                self.max_pools,
            )
        return opened

    def get(self, name: str) -> PoolRuntime | None:
        return self._pools.get(name)

    def lookup(self, name: str) -> PoolRuntime:
        """The pool's runtime; for a pool that does not exist, a vacant one (not kept)."""
        runtime = self._pools.get(name)
        return runtime if runtime is not None else self._vacant(name)

    def serving(self, name: str) -> LoadedBundle:
        """What a pool's predictions come from: its bundle, or the prior (no runtime is
        built for a pool that does not exist)."""
        runtime = self._pools.get(name)
        return (runtime.slot if runtime is not None else self.default_prior).serving

    def _vacant(self, name: str) -> PoolRuntime:
        settings = self._pool_settings(name)
        store = self._store.for_pool(name)
        # Its own slot: nothing may publish into the prior every vacant pool answers with.
        slot, metrics = trainer_slot(settings), TrainingMetrics()
        retrainer = Retrainer(settings, store, metrics, slot, self.leadership)
        calibrator = LiveCalibrator(settings, store, metrics, slot, lambda: False)
        return PoolRuntime(
            name, settings, store, slot, metrics, retrainer, calibrator, PredictionFleet()
        )

    def open(self, name: str) -> PoolRuntime:
        """The pool's runtime, created if new; PoolLimitError past LATENCY_MAX_POOLS."""
        runtime = self._pools.get(name)
        if runtime is not None:
            return runtime
        with self._lock:
            runtime = self._pools.get(name)
            if runtime is None:
                if len(self._pools) >= self.max_pools:
                    raise PoolLimitError(
                        f"pool {name!r} would be pool number {len(self._pools) + 1}, over "
                        f"the limit of {self.max_pools} (LATENCY_MAX_POOLS)"
                    )
                runtime = self._pools[name] = self._build(name)
                log.info("pool %s opened (%d pools)", name, len(self._pools))
        self.added.set()
        return runtime

    def runtimes(self) -> list[PoolRuntime]:
        return list(self._pools.values())

    def metric_registries(self) -> dict[str, CollectorRegistry]:
        return {name: runtime.metrics.registry for name, runtime in list(self._pools.items())}

"""PoolRegistry: the training server's one table from a pool's name to what serves it.

Every pool the service keeps, `default` included, is a PoolRuntime: what a single-pool
trainer holds, its settings (with the pool's own model directory), its view of the one store
(SampleStore confined to the pool), the slot it serves from, its metrics, its retrainer and
live calibration, and the prediction servers that report to it. The retrains of every pool
run in one thread (retrain.loop), each pool on its own schedule; which training replica
retrains a pool is its lease (training_server.pool_leases: one per pool on PostgreSQL, one
lock for all pools elsewhere).

A pool comes into being with its first accepted rows (or a bundle imported into it), up to
LATENCY_MAX_POOLS; at start-up every pool the store or the model directory knows is opened
again. `resolve` is the one lookup of the routes: a pool that does not exist is a light,
read-only PoolView (its settings and store, the prior, the default pool's metrics), which
answers as a fresh service does (no rows, the prior) and is not kept: reads never build a
retrainer, nor use up the pool limit.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass

from prometheus_client import CollectorRegistry

from shared.artifact import BundleError
from shared.live_calibration import remove_live_calibration
from shared.pools import DEFAULT_POOL, pool_dirs, pool_model_dir
from shared.predictor import load_current_bundle
from shared.settings import LegacyArtifacts, TrainingSettings
from shared.slot import BundleSlot, prior_slot
from training_server.bundle_share import BundleShare
from training_server.leadership import Leadership, replica_id
from training_server.legacy.files import publish_prior_files
from training_server.metrics import TrainingMetrics
from training_server.pool_leases import OneLock, PoolLeases
from training_server.prediction_fleet import PredictionFleet
from training_server.retrain.live_calibration import LiveCalibrator
from training_server.retrain.retrainer import Retrainer, RetrainState
from training_server.store import SampleStore

log = logging.getLogger(__name__)


class PoolLimitError(Exception):
    """A new pool past LATENCY_MAX_POOLS."""


@dataclass(frozen=True)
class PoolView:
    """What a request reads of a pool: enough to answer for a pool that does not exist."""

    name: str
    settings: TrainingSettings  # model_dir: the pool's own
    store: SampleStore
    slot: BundleSlot
    metrics: TrainingMetrics
    fleet: PredictionFleet
    state: RetrainState  # its retrains so far (none for a pool with no rows)
    leadership: Leadership  # whether this replica retrains the pool (its lease)
    leases: PoolLeases  # every pool's

    @property
    def owner(self) -> str | None:
        """The training replica that retrains the pool (None: none holds it now)."""
        return self.leases.owner(self.name)

    @property
    def trainer_id(self) -> str:
        return replica_id()


@dataclass(frozen=True)
class PoolRuntime(PoolView):
    """A pool the service keeps: its view, plus what retrains it."""

    retrainer: Retrainer
    calibrator: LiveCalibrator


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
        leases: PoolLeases | None = None,
    ):
        """`store` is the default pool's; `default_slot` and `default_metrics` are the
        ones create_app made (the process's /metrics registers the latter's registry);
        `leases` say which pools this replica retrains (by default: every pool, while it
        holds `leadership`)."""
        self.settings = settings
        self.leadership = leadership  # the single lock (what OneLock follows)
        self.leases = leases or OneLock(leadership, replica_id())
        self._store = store
        self._lock = threading.Lock()
        self.prior = prior_slot(settings)  # what a pool that does not exist answers with
        self.default = self._build(DEFAULT_POOL, default_slot, default_metrics)
        self._pools: dict[str, PoolRuntime] = {DEFAULT_POOL: self.default}
        # Set when a pool is added or rows arrive: wakes the retrain loop (retrain.loop).
        self.added = threading.Event()
        self._arrived: set[str] = set()  # pools with rows since the loop last looked

    def rows_arrived(self, name: str) -> None:
        """Pool `name` stored new rows: the loop steps its live factor now, not on its
        next second (retrain.loop)."""
        with self._lock:
            self._arrived.add(name)
        self.added.set()

    def take_arrived(self) -> set[str]:
        """The pools that stored rows since the last call."""
        with self._lock:
            arrived, self._arrived = self._arrived, set()
        return arrived

    @property
    def max_pools(self) -> int:
        return self.settings.max_pools

    def _pool_settings(self, name: str) -> TrainingSettings:
        """The service's settings with the pool's own model directory."""
        if name == DEFAULT_POOL:
            return self.settings
        return self.settings.model_copy(
            update={"model_dir": pool_model_dir(self.settings.model_dir, name)}
        )

    def _build(
        self, name: str, slot: BundleSlot | None = None, metrics: TrainingMetrics | None = None
    ) -> PoolRuntime:
        """A pool's runtime, resumed from the store and its model directory."""
        settings = self._pool_settings(name)
        store = self._store if name == DEFAULT_POOL else self._store.for_pool(name)
        slot = _serve_published(slot or prior_slot(settings), settings)
        metrics = metrics or TrainingMetrics()
        leadership = self.leases.for_pool(name)
        share = None
        if settings.share_bundles_in_store:
            keep = settings.keep_model_versions
            share = BundleShare(store.engine, name, settings.model_dir, keep=keep)
        retrainer = Retrainer(settings, store, metrics, slot, leadership, share)
        calibrator = LiveCalibrator(
            settings,
            store,
            metrics,
            slot,
            lambda: retrainer.is_leader,
            lambda: retrainer.state.trained_through,
            share,
        )
        retrainer.fit_since = calibrator.fit_since
        if settings.legacy_artifacts is not LegacyArtifacts.NONE:
            # llm-d prediction servers are ready only with a model: the prior's, until then.
            publish_prior_files(settings)
        if not calibrator.enabled:  # a file left by an adaptive run must not keep correcting
            remove_live_calibration(settings.model_dir)
        retrainer.resume()
        return PoolRuntime(
            name,
            settings,
            store,
            slot,
            metrics,
            PredictionFleet(),
            retrainer.state,
            leadership,
            self.leases,
            retrainer,
            calibrator,
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
        """The pool `name` if the service keeps it."""
        return self._pools.get(name)

    def resolve(self, name: str) -> PoolView:
        """The pool `name`; for a pool that does not exist, a read-only view answering as a
        fresh service does (built per call, cheaply, and not kept)."""
        runtime = self._pools.get(name)
        if runtime is not None:
            return runtime
        return PoolView(
            name,
            self._pool_settings(name),
            self._store.for_pool(name),
            self.prior,  # nothing publishes into a pool that does not exist
            self.default.metrics,  # made-up names add no series
            PredictionFleet(),
            RetrainState(),
            self.leases.for_pool(name),
            self.leases,
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

    def adopt(self, name: str) -> None:
        """Open a pool another replica created, now that this one is to retrain it (a
        pool past the limit is left to the replicas that keep it)."""
        try:
            self.open(name)
        except PoolLimitError as exc:
            log.warning("pool %s not opened here: %s", name, exc)

    def names(self) -> list[str]:
        return list(self._pools)

    def runtimes(self) -> list[PoolRuntime]:
        return list(self._pools.values())

    def metric_registries(self) -> dict[str, CollectorRegistry]:
        return {name: runtime.metrics.registry for name, runtime in list(self._pools.items())}

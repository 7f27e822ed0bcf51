"""BundleShare: one pool's newest bundle and live calibration file kept in the store too,
for training replicas that share no model directory (LATENCY_SHARE_BUNDLES_IN_STORE).

Where prediction servers mirror from the training server's Service (llm-d's chart: no
ReadWriteMany volume, `TRAINING_SERVER_URL`), any training replica may answer
/model/download/info, /model/export and /calibration, whichever replica retrains the
pool (training_server.pool_leases). So the owner writes each bundle it publishes (its
export archive) and each live calibration file into the pool's row of `pool_bundles`,
and every other replica, once a calibration interval (a second), imports a newer bundle
into its own model directory, verified as any import, and copies the calibration file
(SharePuller: a thread of its own, so a busy retrain loop neither delays the pulls nor
waits for them).
The store rather than a redirect to the owner: every replica can already reach the store,
none needs another's address, and a replica answers from its own files as before.
A bundle is a few hundred KB; one row per pool, replaced, so the table stays small.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol

from sqlalchemy import Engine, select
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.exc import SQLAlchemyError

from shared.archive import import_loaded, pack_bundle
from shared.artifact import BundleError, bundle_dir_for, replace_file
from shared.live_calibration import LIVE_CALIBRATION
from shared.predictor import LoadedBundle
from training_server.tables import pool_bundles

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SharedState:
    version: str | None
    calibration: bytes | None


class BundleShare:
    def __init__(self, engine: Engine, pool: str, model_dir: Path, *, keep: int):
        self.engine, self.pool, self.model_dir, self.keep = engine, pool, model_dir, keep
        self._calibration: bytes | None = None  # the last calibration file written or read
        self._refused: str | None = None  # a shared version that failed to import, once

    # the owner ----------------------------------------------------------------------
    def push_bundle(self, version: str) -> None:
        """Share the bundle just published (a failure is logged: the next one retries)."""
        try:
            archive = pack_bundle(bundle_dir_for(self.model_dir, version), {"version": version})
            self._upsert(version=version, archive=archive)
        except (OSError, SQLAlchemyError):
            log.warning("pool %s: bundle %s not shared", self.pool, version, exc_info=True)

    def push_calibration(self) -> None:
        """Share the live calibration file when it changed since the last push."""
        try:
            data = (self.model_dir / LIVE_CALIBRATION).read_bytes()
        except FileNotFoundError:
            return
        if data == self._calibration:
            return
        try:
            self._upsert(calibration=data)
            self._calibration = data
        except SQLAlchemyError:
            log.warning("pool %s: live calibration not shared", self.pool, exc_info=True)

    def _upsert(self, **values: object) -> None:
        row = {"pool": self.pool, "updated_at": datetime.now(UTC), **values}
        dialect = self.engine.dialect.name
        insert = pg_insert if dialect == "postgresql" else sqlite_insert
        stmt = insert(pool_bundles).values(**row)
        stmt = stmt.on_conflict_do_update(
            index_elements=["pool"], set_={k: v for k, v in row.items() if k != "pool"}
        )
        with self.engine.begin() as conn:
            conn.execute(stmt)

    # the others -----------------------------------------------------------------------
    def state(self) -> SharedState:
        with self.engine.connect() as conn:
            row = conn.execute(
                select(pool_bundles.c.version, pool_bundles.c.calibration).where(
                    pool_bundles.c.pool == self.pool
                )
            ).first()
        return SharedState(None, None) if row is None else SharedState(row[0], row[1])

    def pull(self, served: str | None) -> LoadedBundle | None:
        """Import the shared bundle when it is newer than `served` (returned, loaded) and
        copy a changed calibration file; None when there is no newer bundle."""
        try:
            shared = self.state()
        except SQLAlchemyError:
            log.warning("pool %s: shared bundle not read (store unreachable)", self.pool)
            return None
        if shared.calibration is not None and shared.calibration != self._calibration:
            self.model_dir.mkdir(parents=True, exist_ok=True)
            replace_file(self.model_dir / LIVE_CALIBRATION, shared.calibration)
            self._calibration = shared.calibration
        version = shared.version
        if version is None or version == self._refused or (served and version <= served):
            return None
        try:
            with self.engine.connect() as conn:
                archive = conn.execute(
                    select(pool_bundles.c.archive).where(
                        pool_bundles.c.pool == self.pool, pool_bundles.c.version == version
                    )
                ).scalar_one_or_none()
            if archive is None:  # replaced meanwhile: the next pull takes the newer one
                return None
            return import_loaded(self.model_dir, archive, keep=self.keep)
        except SQLAlchemyError:
            log.warning("pool %s: shared bundle not read (store unreachable)", self.pool)
            return None
        except BundleError:
            log.warning("pool %s: shared bundle %s refused", self.pool, version, exc_info=True)
            self._refused = version
            return None


class Follower(Protocol):
    def pull_shared(self) -> None:
        """Import the pool's newest shared bundle and calibration file when this replica
        does not retrain the pool (retrain.live_calibration.LiveCalibrator)."""


class SharePuller:
    """Every `interval` seconds, each pool's follower pulls from the store, in this thread."""

    def __init__(self, followers: Callable[[], Sequence[Follower]], interval: float):
        self.followers, self.interval = followers, interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="share-puller", daemon=True)

    def start(self) -> SharePuller:
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            for follower in self.followers():
                try:
                    follower.pull_shared()
                except Exception:  # one pool's hiccup must not stop the others' pulls
                    log.exception("pulling a shared bundle failed; next interval again")

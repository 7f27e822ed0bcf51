"""SampleStore: every SQL statement of the training server lives here, each confined to one
pool. They all start from the pool-filtered selectors at the top of SampleStore
(`_samples`, `_retrains`, `_delete_samples`, `_delete_retrains`; inserts stamp the pool),
so a new query cannot read or delete another pool's rows by forgetting a condition.
`stored_pools` alone reads across pools, by design.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, Delete, Engine, Select, and_, delete, func, insert, select, text
from sqlalchemy.sql.elements import ColumnElement

from shared.features import (
    LABEL_CODES,
    LABEL_FIELDS,
    NUMERIC_FIELDS,
    POD_TYPE_CODES,
    Columns,
    code_column,
    label_codes,
)
from shared.live_groups import group_labels
from shared.pools import DEFAULT_POOL
from shared.schemas import TrainingEntry
from shared.targets import TARGETS, Target
from training_server.retrain_record import Outcome, RetrainRecord, from_row, to_columns
from training_server.sample_counts import TARGET_BITS, SampleCounts, measures_bits
from training_server.tables import retrains, samples

KV_BUCKETS = 10
# Any label is accepted; only its feature code matters, so long labels are cut for storage.
POD_TYPE_STORED_CHARS = 64
POD_CLASS_STORED_CHARS = 64
PREFIX_BUCKETS = 4


def bucket_of(kv_cache_percentage: float, prefix_cache_score: float) -> int:
    """Retention bucket: KV-cache decile x prefix-score quarter, so rare regimes survive."""
    kv = min(int(kv_cache_percentage * KV_BUCKETS), KV_BUCKETS - 1)
    prefix = min(int(prefix_cache_score * PREFIX_BUCKETS), PREFIX_BUCKETS - 1)
    return kv * PREFIX_BUCKETS + prefix


def _measures_values(target: Target) -> tuple[int, int]:
    return (TARGET_BITS[target], 3)


def _plain_rows(conn: Connection, stmt: Any) -> list[tuple[Any, ...]]:
    """The driver's own tuples of a numeric read, without SQLAlchemy's Row objects: the
    window of 100k rows loads in half the time, and numpy reads tuples directly (a Row
    goes through a per-item key lookup, measured 1.2M calls for 100k served rows)."""
    result = conn.execute(stmt)
    rows = list(result.cursor.fetchall()) if result.cursor else []
    result.close()
    return rows


def _feature_columns(rows: Sequence[tuple[Any, ...]], start: int) -> Columns:
    """The feature columns of rows read as NUMERIC_FIELDS then LABEL_FIELDS from position
    `start` on; `pod_class` and `pod_type` also as stored (object arrays: the per-class
    figures of a retrain and the live factors' groups name labels, which codes cannot)."""
    width = len(NUMERIC_FIELDS)
    numeric = np.array([r[start : start + width] for r in rows], dtype=np.float64)
    numeric = numeric.reshape(len(rows), width)
    columns: Columns = {name: numeric[:, i] for i, name in enumerate(NUMERIC_FIELDS)}
    for i, name in enumerate(LABEL_FIELDS):
        values = [r[start + width + i] for r in rows]
        columns[code_column(name)] = label_codes(LABEL_CODES[name], values)
        if name in ("pod_class", "pod_type"):
            columns[name] = np.array(values, dtype=object)
    return columns


@dataclass(frozen=True)
class ServedRows:
    """Stored rows as (actual, served prediction) pairs; NaN marks a missing prediction.
    `columns` are their features when asked for (to ask a model what it answers now)."""

    ids: np.ndarray
    actual: dict[Target, np.ndarray]
    predicted: dict[Target, np.ndarray]
    columns: Columns

    def scored(
        self, target: Target, among: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(actual, predicted) of the rows (`among` them, a mask) that measure `target` and
        carry a prediction."""
        actual, predicted = self.actual[target], self.predicted[target]
        keep = (actual > 0) & ~np.isnan(predicted)
        if among is not None:
            keep &= among
        return actual[keep], predicted[keep]


class SampleStore:
    """One pool's rows and retrains (`pool`); every pool's store shares the engine, and
    every statement here is confined to its pool (`for_pool` gives another pool's)."""

    def __init__(
        self,
        engine: Engine,
        *,
        test_ratio: float,
        rng: random.Random | None = None,
        pool: str = DEFAULT_POOL,
    ):
        self.engine = engine
        self.test_ratio = test_ratio
        self.pool = pool
        self._rng = rng or random.Random()
        # The counts as of the last count (`counts`), plus the rows this replica stored
        # since: what /metrics and GET /pools report without a query per pool (exact after
        # each count, which every retrain tick and /data/status make).
        self._known = SampleCounts()
        self._known_lock = threading.Lock()

    def for_pool(self, pool: str) -> SampleStore:
        """The store of `pool`, on the same database."""
        return SampleStore(self.engine, test_ratio=self.test_ratio, pool=pool)

    # the pool-filtered selectors: every statement below starts from one ---------------
    def _samples(self, *columns: Any) -> Select[Any]:
        return select(*columns).where(samples.c.pool == self.pool)

    def _retrains(self, *columns: Any) -> Select[Any]:
        return select(*columns).where(retrains.c.pool == self.pool)

    def _delete_samples(self, *where: ColumnElement[bool]) -> Delete:
        return delete(samples).where(samples.c.pool == self.pool, *where)

    def _delete_retrains(self) -> Delete:
        return delete(retrains).where(retrains.c.pool == self.pool)

    def stored_pools(self) -> list[str]:
        """Every pool with a stored row or a recorded retrain, sorted (across pools)."""
        stmt = select(samples.c.pool).distinct().union(select(retrains.c.pool).distinct())
        with self.engine.connect() as conn:
            return sorted(str(name) for (name,) in conn.execute(stmt))

    # ingestion -------------------------------------------------------------------------
    def add_samples(self, entries: Sequence[TrainingEntry]) -> int:
        """Insert in one transaction; returns only after the commit is durable."""
        now = datetime.now(UTC)
        rows = []
        for entry in entries:
            row = entry.model_dump(exclude={"timestamp"})
            row.update(
                pod_type=entry.pod_type[:POD_TYPE_STORED_CHARS],
                pod_class=entry.pod_class[:POD_CLASS_STORED_CHARS],
                received_at=now,
                timestamp=entry.timestamp or now,
                measures=measures_bits(entry),
                is_test=self._rng.random() < self.test_ratio,
                bucket=bucket_of(entry.kv_cache_percentage, entry.prefix_cache_score),
                pool=self.pool,
            )
            rows.append(row)
        with self.engine.begin() as conn:
            conn.execute(insert(samples), rows)
        with self._known_lock:
            self._known = self._known.plus((r["is_test"], r["measures"], 1) for r in rows)
        return len(rows)

    # reads ------------------------------------------------------------------------------
    def ping(self) -> None:
        """Raise (SQLAlchemyError) unless the database answers."""
        with self.engine.connect() as conn:
            conn.execute(text("SELECT 1"))

    def _count(self, conn: Connection) -> SampleCounts:
        c = samples.c
        stmt = self._samples(c.is_test, c.measures, func.count()).group_by(c.is_test, c.measures)
        return SampleCounts().plus(
            (bool(is_test), int(measures), int(n)) for is_test, measures, n in conn.execute(stmt)
        )

    def counts(self) -> SampleCounts:
        """The rows stored now, per split and target (one grouped query)."""
        with self.engine.connect() as conn:
            counted = self._count(conn)
        with self._known_lock:
            self._known = counted
        return counted

    @property
    def known_counts(self) -> SampleCounts:
        """The last counts plus the rows this replica stored since, without a query (also
        what /metrics keeps reporting while the database does not answer)."""
        return self._known

    def queue_counts(self) -> dict[str, int]:
        """Training rows per target split by queue state, as llm-d's ensemble would split
        them: {"ttft_noqueue_samples": rows with num_request_waiting == 0,
        "ttft_queued_samples": rows with num_request_waiting > 0, "tpot_...": ...}."""
        c = samples.c
        queued = (c.num_request_waiting > 0).label("queued")
        stmt = (
            self._samples(c.measures, queued, func.count())
            .where(c.is_test.is_(False))
            .group_by(c.measures, queued)
        )
        out = {f"{t.value}_{state}_samples": 0 for t in TARGETS for state in ("noqueue", "queued")}
        with self.engine.connect() as conn:
            for measures, is_queued, count in conn.execute(stmt):
                for target, bit in TARGET_BITS.items():
                    if measures & bit:
                        state = "queued" if is_queued else "noqueue"
                        out[f"{target.value}_{state}_samples"] += count
        return out

    def max_sample_id(self) -> int:
        with self.engine.connect() as conn:
            newest = self._samples(func.coalesce(func.max(samples.c.id), 0))
            return int(conn.execute(newest).scalar_one())

    def window(
        self,
        target: Target,
        *,
        test: bool,
        limit: int | None = None,
        since_id: int = 0,
        through_id: int | None = None,
        group: str | None = None,
    ) -> tuple[Columns, np.ndarray]:
        """The newest `limit` (all if None) rows measuring `target` in one split with an id
        of at least `since_id` and at most `through_id` (None: no bound), and of the live
        factor's `group` (shared.live_groups) when given; oldest first. Served by
        ix_samples_window, so a large store is never read whole. Besides the feature
        columns, `pod_class` holds each row's class label as stored (an object array: the
        per-class figures of a retrain name classes, which codes cannot)."""
        cols = [samples.c[name] for name in NUMERIC_FIELDS]
        labels = [samples.c[name] for name in LABEL_FIELDS]
        stmt = (
            self._samples(samples.c[target.actual_field], *cols, *labels)
            .where(
                samples.c.is_test == test,
                samples.c.measures.in_(_measures_values(target)),
                samples.c.id >= since_id,
            )
            .order_by(samples.c.id.desc())
            .limit(limit)
        )
        if through_id is not None:
            stmt = stmt.where(samples.c.id <= through_id)
        if group is not None:
            role, pod_class = group_labels(group)
            stored_role = func.lower(func.trim(samples.c.pod_type))
            stmt = stmt.where(
                func.lower(func.trim(samples.c.pod_class)) == pod_class,
                stored_role == role if role else stored_role.not_in(list(POD_TYPE_CODES)),
            )
        with self.engine.connect() as conn:
            rows = _plain_rows(conn, stmt)[::-1]
        actual = np.array([r[0] for r in rows], dtype=np.float64)
        return _feature_columns(rows, 1), actual

    def served_since(self, after_id: int, *, limit: int, features: bool = False) -> ServedRows:
        """Up to `limit` rows with id > after_id, oldest first: for each target the actual
        and the prediction the EPP acted on (NaN where it sent none), and with `features`
        their feature columns (the live factor asks its bundle about them; the retrain's
        live scores, up to 200,000 rows, need none). Read by primary key."""
        c = samples.c
        numbers = [
            c.id,
            *(c[t.actual_field] for t in TARGETS),
            *(c[t.predicted_field] for t in TARGETS),
        ]
        extra = [*(c[name] for name in NUMERIC_FIELDS), *(c[name] for name in LABEL_FIELDS)]
        stmt = (
            self._samples(*numbers, *(extra if features else ()))
            .where(c.id > after_id)
            .order_by(c.id)
            .limit(limit)
        )
        with self.engine.connect() as conn:
            rows = _plain_rows(conn, stmt)
        width = len(numbers)
        table = np.array([r[:width] for r in rows], dtype=np.float64).reshape(len(rows), width)
        n = len(TARGETS)
        return ServedRows(
            ids=table[:, 0].astype(np.int64),
            actual={t: table[:, 1 + i] for i, t in enumerate(TARGETS)},
            predicted={t: table[:, 1 + n + i] for i, t in enumerate(TARGETS)},
            columns=_feature_columns(rows, width) if features else {},
        )

    # retention --------------------------------------------------------------------------
    def enforce_retention(self, *, per_bucket: int, test_total: int) -> int:
        """Keep the newest `per_bucket` training rows per (kind, bucket) and `test_total`
        test rows per kind; returns how many rows were deleted."""
        c = samples.c
        deleted = 0
        with self.engine.begin() as conn:
            train_groups = conn.execute(
                self._samples(c.measures, c.bucket)
                .where(c.is_test.is_(False))
                .group_by(c.measures, c.bucket)
                .having(func.count() > per_bucket)
            ).all()
            test_groups = conn.execute(
                self._samples(c.measures)
                .where(c.is_test.is_(True))
                .group_by(c.measures)
                .having(func.count() > test_total)
            ).all()
            conditions = [
                (and_(c.is_test.is_(False), c.measures == m, c.bucket == b), per_bucket)
                for m, b in train_groups
            ] + [(and_(c.is_test.is_(True), c.measures == m), test_total) for (m,) in test_groups]
            for where, keep in conditions:
                newest_dropped = (
                    self._samples(c.id).where(where).order_by(c.id.desc()).offset(keep).limit(1)
                ).scalar_subquery()
                dropped = self._delete_samples(where, c.id <= newest_dropped)
                deleted += conn.execute(dropped).rowcount
        return deleted

    def flush(self, *, training: bool, test: bool) -> dict[str, int]:
        """Delete samples; returns what was flushed per target and split, plus the total
        rows (`samples_flushed`), counted in the same transaction as the delete."""
        splits = [flag for flag, wanted in ((False, training), (True, test)) if wanted]
        with self.engine.begin() as conn:
            before = self._count(conn)
            if splits:
                conn.execute(self._delete_samples(samples.c.is_test.in_(splits)))
        with self._known_lock:
            self._known = before.without(training=training, test=test)
        flushed = {"samples_flushed": 0}
        for split, wanted, label in (
            (before.training, training, "training"),
            (before.test, test, "test"),
        ):
            for target in TARGETS:
                count = split.by_target[target] if wanted else 0
                flushed[f"{target.value}_{label}_samples_flushed"] = count
            if wanted:
                flushed["samples_flushed"] += split.total
        return flushed

    # retrain history --------------------------------------------------------------------
    def record_retrain(self, record: RetrainRecord) -> int:
        """Insert `record` (its id is the table's to give), as a retrain of this pool;
        returns the new row's key."""
        # Unknown values are left out, as NULLs: a JSON column would store None as 'null'.
        stamped = replace(record, pool=self.pool)
        row = {k: v for k, v in to_columns(stamped).items() if v is not None}
        with self.engine.begin() as conn:
            key = conn.execute(insert(retrains).values(**row)).inserted_primary_key
            assert key is not None  # an INSERT of one row always has one
            return int(key[0])

    def list_retrains(
        self, *, limit: int = 50, offset: int = 0, ok_only: bool = False
    ) -> list[RetrainRecord]:
        """Recorded retrains, newest first."""
        stmt = self._retrains(retrains).order_by(retrains.c.id.desc()).limit(limit).offset(offset)
        if ok_only:
            stmt = stmt.where(retrains.c.status == Outcome.OK.value)
        with self.engine.connect() as conn:
            return [from_row(dict(r._mapping)) for r in conn.execute(stmt)]

    def clear_retrains(self) -> int:
        with self.engine.begin() as conn:
            return conn.execute(self._delete_retrains()).rowcount

"""The store cannot forget the pool: every statement a pool's SampleStore sends names that
pool (watched on the real database's cursor, SQLite and PostgreSQL), and the counts it keeps
in memory follow ingestion, flushes and recounts without a query."""

from __future__ import annotations

import inspect
import random
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Engine, event, select

from shared.targets import TARGETS, Target
from tests.training_server.test_store import entry, retrain_record
from training_server.store import SampleStore
from training_server.tables import samples

POOL = "h200-llama"
# Methods that read across pools by design, or send no statement about rows.
NOT_CONFINED = {"stored_pools", "ping", "for_pool"}


@contextmanager
def statements(engine: Engine) -> Iterator[list[tuple[str, Any]]]:
    """Every (SQL, parameters) the engine's cursors execute inside the block."""
    seen: list[tuple[str, Any]] = []

    def watch(_conn: Any, _cursor: Any, sql: str, params: Any, *_: Any) -> None:
        seen.append((sql, params))

    event.listen(engine, "before_cursor_execute", watch)
    try:
        yield seen
    finally:
        event.remove(engine, "before_cursor_execute", watch)


def unconfined(seen: list[tuple[str, Any]]) -> list[str]:
    """The statements about rows or retrains that do not carry the pool's name."""

    def values(params: Any) -> list[Any]:
        if isinstance(params, dict):
            return list(params.values())
        if isinstance(params, list | tuple) and params and isinstance(params[0], list | tuple):
            return [v for row in params for v in row]  # executemany
        if isinstance(params, list) and params and isinstance(params[0], dict):
            return [v for row in params for v in row.values()]
        return list(params or ())

    about_rows = [(sql, p) for sql, p in seen if "samples" in sql or "retrains" in sql]
    return [sql for sql, params in about_rows if POOL not in values(params)]


def exercise(store: SampleStore) -> set[str]:
    """Call every public method of `store` that touches rows; returns the names called."""
    store.add_samples([entry(ttft=float(i + 1), tpot=float(i % 3)) for i in range(30)])
    store.counts()
    store.queue_counts()
    store.max_sample_id()
    for target in TARGETS:
        store.window(target, test=False, limit=10)
        store.window(target, test=True)
    store.served_since(0, limit=100)
    assert store.enforce_retention(per_bucket=2, test_total=1) > 0  # some groups to trim
    store.record_retrain(retrain_record("v1"))
    store.list_retrains(ok_only=True)
    store.clear_retrains()
    store.flush(training=True, test=True)
    return {
        "add_samples",
        "counts",
        "queue_counts",
        "max_sample_id",
        "window",
        "served_since",
        "enforce_retention",
        "record_retrain",
        "list_retrains",
        "clear_retrains",
        "flush",
    }


def test_every_statement_of_a_pool_store_names_its_pool(store: SampleStore) -> None:
    other = SampleStore(store.engine, test_ratio=0.3, pool="other")
    other.add_samples([entry(ttft=5.0) for _ in range(20)])
    pool = SampleStore(store.engine, test_ratio=0.3, rng=random.Random(3), pool=POOL)
    with statements(store.engine) as seen:
        called = exercise(pool)
    assert len(seen) >= len(called)
    assert unconfined(seen) == []
    # Every public method is exercised above (a new one must be added there).
    public = {
        name
        for name, member in inspect.getmembers(SampleStore, inspect.isfunction)
        if not name.startswith("_")
    }
    assert public - NOT_CONFINED == called
    # And none of it reached the other pool's rows.
    assert other.counts().training.total + other.counts().test.total == 20


def test_the_watch_sees_a_statement_that_forgets_the_pool(store: SampleStore) -> None:
    with statements(store.engine) as seen, store.engine.connect() as conn:
        conn.execute(select(samples.c.id).where(samples.c.is_test.is_(False)))
    assert len(unconfined(seen)) == 1


def test_known_counts_follow_ingestion_and_flush_without_a_query(store: SampleStore) -> None:
    pool = SampleStore(store.engine, test_ratio=0.0, pool=POOL)
    pool.add_samples([entry(ttft=1.0), entry(tpot=2.0), entry(ttft=3.0, tpot=4.0)])
    with statements(store.engine) as seen:
        known = pool.known_counts
    assert seen == []
    assert known == pool.counts()
    assert known.training.by_target == {Target.TTFT: 2, Target.TPOT: 2}
    # Another replica's rows (a second store object on the same pool) show at the recount.
    SampleStore(store.engine, test_ratio=0.0, pool=POOL).add_samples([entry(ttft=9.0)])
    assert pool.known_counts.training.total == 3
    assert pool.counts().training.total == pool.known_counts.training.total == 4
    pool.flush(training=True, test=False)
    assert pool.known_counts.training.total == 0

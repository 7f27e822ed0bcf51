"""Engine construction: SQLite tuned for durable concurrent use, PostgreSQL pooled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

# How long a SQLite writer waits for the write lock before the store error (ingestion: 503).
# The URL's own `timeout` (seconds, pysqlite's parameter: sqlite:///x.db?timeout=5) wins.
SQLITE_BUSY_TIMEOUT_SEC = 5.0  # lock waits are milliseconds; past this the caller is told


def sqlite_busy_timeout(url: str) -> float:
    value = make_url(url).query.get("timeout")
    if value is None:
        return SQLITE_BUSY_TIMEOUT_SEC
    timeout = float(value if isinstance(value, str) else value[-1])
    if not timeout >= 0:  # also refuses NaN
        raise ValueError(f"SQLite timeout must be >= 0 seconds, got {value!r}")
    return timeout


def make_engine(url: str) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)
    if parsed.database and parsed.database != ":memory:":
        Path(parsed.database).parent.mkdir(parents=True, exist_ok=True)
    timeout = sqlite_busy_timeout(url)
    engine = create_engine(url, connect_args={"timeout": timeout})

    @event.listens_for(engine, "connect")
    def _pragmas(dbapi_conn: Any, _record: Any) -> None:
        cursor = dbapi_conn.cursor()
        # WAL lets the retrainer read while ingestion writes; FULL fsyncs every commit, so
        # a 202 means the rows survive a power cut, not only a process crash.
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        # A locked database answers within the timeout instead of holding a request (and
        # a worker thread) for longer than the caller waits.
        cursor.execute(f"PRAGMA busy_timeout={int(timeout * 1000)}")
        cursor.close()

    return engine

"""Read a store's newest rows, read-only: the columns of `samples` the advice needs.

SQLite is opened through a `file:` URI with `mode=ro` (nothing can be written); when no
`-wal` file lies beside the database (no trainer has it open) also with `immutable=1`, so
that not even the `-wal`/`-shm` files a read-only WAL reader would create appear. With a
trainer running, its `-wal` is read as it stands. PostgreSQL reads in a `READ ONLY`
transaction. A store that cannot be opened or has no `samples` table raises StoreError
(one line for the command, exit 1); a URL of another kind raises UrlError (exit 2).

The window is the newest `hours` of the rows' `timestamp` (the EPP's, or the arrival time
when it sent none), counted back from the newest row, not from now: a store that stopped
receiving yesterday is still read. At most MAX_ROWS rows, the newest by id.

`pod_class` (our optional hardware label, docs/api.md 2.1, migration 0005) is read when the
store has the column; a row without one, or a store from before it, reads "". `pod_type`
(the pod's P/D role: "prefill", "decode", "" monolithic) has been a column since the first
migration, so every store has it.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, fields, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import numpy as np
from sqlalchemy import Connection, Engine, create_engine, func, inspect, literal, select, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.pool import NullPool

from training_server.tables import samples

MAX_ROWS = 200_000  # the newest rows read at most (a 6-hour window of a busy pool is less)
COLUMNS = (
    "timestamp",
    "input_token_length",
    "num_tokens_generated",
    "num_request_waiting",
    "num_request_running",
    "kv_cache_percentage",
    "prefix_cache_score",
    "prefill_tokens_in_flight",
    "actual_ttft_ms",
    "actual_tpot_ms",
)
CLASS_COLUMN = "pod_class"  # optional: stores migrated before 0005 lack it
ROLE_COLUMN = "pod_type"  # in every store (migration 0001)
CONNECT_TIMEOUT_S = 10


class StoreError(Exception):
    """The store cannot be read (absent, unreachable, not migrated): exit 1."""


class UrlError(Exception):
    """The URL is not one of a store we can read: exit 2."""


@dataclass(frozen=True)
class StoreRows:
    """One array per column, oldest row first; times in epoch seconds."""

    timestamp_s: np.ndarray
    input_tokens: np.ndarray
    tokens_generated: np.ndarray
    waiting: np.ndarray
    running: np.ndarray
    kv_cache: np.ndarray
    prefix_score: np.ndarray
    prefill_in_flight: np.ndarray
    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    pod_class: np.ndarray | None = None  # str per row ("" none); None: no row has one
    pod_type: np.ndarray | None = None  # str per row ("" monolithic); None: no row has one

    def __len__(self) -> int:
        return len(self.timestamp_s)

    def classes(self) -> np.ndarray:
        """Each row's pod_class, "" where it has none."""
        if self.pod_class is None:
            return np.full(len(self), "", dtype=object)
        return self.pod_class

    def roles(self) -> np.ndarray:
        """Each row's pod_type (P/D role), "" where it has none."""
        if self.pod_type is None:
            return np.full(len(self), "", dtype=object)
        return self.pod_type

    def subset(self, keep: np.ndarray) -> StoreRows:
        """The rows where `keep` (a boolean mask) is true, every column alike."""
        columns = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(self, **{k: v[keep] for k, v in columns.items() if v is not None})

    @property
    def measures_ttft(self) -> np.ndarray:
        return self.ttft_ms > 0

    @property
    def measures_tpot(self) -> np.ndarray:
        return self.tpot_ms > 0


def _sqlite_engine(database: str | None) -> Engine:
    if not database or database == ":memory:":
        raise UrlError("a SQLite URL must name a database file (sqlite:///path/to/store.db)")
    path = Path(database).resolve()
    if not path.is_file():
        raise StoreError(f"no SQLite store at {path}")
    immutable = "" if Path(f"{path}-wal").exists() else "&immutable=1"
    uri = f"file:{quote(str(path))}?mode=ro{immutable}"

    def connect() -> sqlite3.Connection:
        return sqlite3.connect(uri, uri=True, check_same_thread=False)

    return create_engine("sqlite://", creator=connect, poolclass=NullPool)


def open_read_only(url: str) -> Engine:
    """An engine that can only read the store at `url` (see the module docstring)."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise UrlError(f"not a database URL: {url!r}") from None
    backend = parsed.get_backend_name()
    if backend == "sqlite":
        return _sqlite_engine(parsed.database)
    if backend != "postgresql":
        raise UrlError(
            f"unsupported store {backend!r}: the trainer's stores are SQLite and PostgreSQL"
        )
    return create_engine(
        url, poolclass=NullPool, connect_args={"connect_timeout": CONNECT_TIMEOUT_S}
    )


def begin_read_only(conn: Connection) -> None:
    """PostgreSQL: this transaction may only read (SQLite connections already can only)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SET TRANSACTION READ ONLY"))


def _check_migrated(conn: Connection, url: str) -> None:
    inspector = inspect(conn)
    if not inspector.has_table("samples"):
        raise StoreError(
            f"the store at {safe_url(url)} is not migrated (no samples table): run "
            "`latency-predictor migrate` with LATENCY_DB_URL set to it, or start the trainer "
            "on it once"
        )
    present = {column["name"] for column in inspector.get_columns("samples")}
    missing = [name for name in COLUMNS if name not in present]
    if missing:
        raise StoreError(f"the store's samples table lacks {', '.join(missing)}: migrate it")


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _has_class(conn: Connection) -> bool:
    return any(col["name"] == CLASS_COLUMN for col in inspect(conn).get_columns("samples"))


def _columns(
    conn: Connection, hours: float, max_rows: int, pool: str | None
) -> list[tuple[object, ...]]:
    """The rows' COLUMNS, then their pod_class ("" in a store without the column) and
    pod_type."""
    c = samples.c
    in_pool = [] if pool is None else [c.pool == pool]
    newest = conn.execute(select(func.max(c.timestamp)).where(*in_pool)).scalar()
    if newest is None:
        return []
    cutoff = _aware(newest) - timedelta(hours=hours)
    if conn.dialect.name == "sqlite":  # stored naive (UTC); compared as text
        cutoff = cutoff.replace(tzinfo=None)
    label = c[CLASS_COLUMN] if _has_class(conn) else literal("")
    stmt = (
        select(*(c[name] for name in COLUMNS), label, c[ROLE_COLUMN])
        .where(c.timestamp >= cutoff, *in_pool)
        .order_by(c.id.desc())
        .limit(max_rows)
    )
    return [tuple(row) for row in conn.execute(stmt)][::-1]


def _arrays(rows: list[tuple[object, ...]]) -> StoreRows:
    times = np.array([_aware(r[0]).timestamp() for r in rows], dtype=np.float64)  # type: ignore[arg-type]
    numeric = np.array([r[1:-2] for r in rows], dtype=np.float64).reshape(
        len(rows), len(COLUMNS) - 1
    )
    labels = np.array([str(r[-2] or "") for r in rows], dtype=object)
    roles = np.array([str(r[-1] or "") for r in rows], dtype=object)
    order = np.argsort(times, kind="stable")
    col = {name: numeric[order, i] for i, name in enumerate(COLUMNS[1:])}
    return StoreRows(
        timestamp_s=times[order],
        input_tokens=col["input_token_length"],
        tokens_generated=col["num_tokens_generated"],
        waiting=col["num_request_waiting"],
        running=col["num_request_running"],
        kv_cache=col["kv_cache_percentage"],
        prefix_score=col["prefix_cache_score"],
        prefill_in_flight=col["prefill_tokens_in_flight"],
        ttft_ms=col["actual_ttft_ms"],
        tpot_ms=col["actual_tpot_ms"],
        pod_class=labels[order] if any(labels) else None,
        pod_type=roles[order] if any(roles) else None,
    )


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "?"


def read_rows(
    url: str, hours: float, max_rows: int = MAX_ROWS, *, pool: str | None = None
) -> StoreRows:
    """The newest `hours` of rows (at most `max_rows`) of `pool` (None: of every pool),
    oldest first; StoreError when the store cannot be read."""
    engine = open_read_only(url)
    try:
        with engine.connect() as conn:
            begin_read_only(conn)
            _check_migrated(conn, url)
            rows = _columns(conn, hours, max_rows, pool)
            conn.rollback()
    except SQLAlchemyError as exc:
        cause = str(getattr(exc, "orig", None) or exc).strip().splitlines()[0]
        raise StoreError(f"cannot read the store at {safe_url(url)}: {cause}") from None
    finally:
        engine.dispose()
    return _arrays(rows)

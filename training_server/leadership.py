"""Which training replica retrains: exactly one holds the leadership, the others follow.

Every replica ingests; only the leader fits and publishes. The lock is one the operating
system or the database drops by itself when the holder dies (a closed socket or file), so
there is no lease to renew and no clock to trust: a follower takes over on its next try.

  PostgreSQL  session-level pg_try_advisory_lock on one dedicated connection
  SQLite      an exclusive flock on "<database file>.leader" (replicas on one machine)
  :memory:    always the leader (nothing else can share the database)
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import socket
import threading
from pathlib import Path
from typing import Any, ClassVar, Protocol

from sqlalchemy import Connection, Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

log = logging.getLogger(__name__)

LOCK_NAME = "latency-predictor-retrainer"


def replica_id() -> str:
    """host:pid names this training replica in the retrains table and /data/status."""
    return f"{socket.gethostname()}:{os.getpid()}"


class Leadership(Protocol):
    @property
    def is_leader(self) -> bool: ...

    def try_acquire(self) -> bool:
        """Non-blocking; True while held (asking again while held is cheap and safe)."""

    def release(self) -> None: ...


class AlwaysLeader:
    """A database no other process can open: this replica is the only one."""

    is_leader = True

    def try_acquire(self) -> bool:
        return True

    def release(self) -> None:
        pass


class FileLeadership:
    """flock(LOCK_EX | LOCK_NB) on a file: the kernel releases it when the process dies.

    The lock belongs to the open file description, so two instances exclude each other even
    inside one process."""

    def __init__(self, path: Path):
        self.path = path
        self._fh: Any = None
        self._mutex = threading.Lock()  # the loop thread and a manual /retrain both ask

    @property
    def is_leader(self) -> bool:
        return self._fh is not None

    def try_acquire(self) -> bool:
        with self._mutex:
            if self._fh is not None:
                return True
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fh = self.path.open("a")
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                fh.close()
                return False
            self._fh = fh
            log.info("leadership acquired (flock %s)", self.path)
            return True

    def release(self) -> None:
        with self._mutex:
            if self._fh is not None:
                self._fh.close()  # closing the last descriptor drops the flock
                self._fh = None


def _lock_key(schema: str) -> int:
    """A stable signed 64-bit key (Python's hash() is salted per process, so not that).

    Advisory locks are per database, so the schema is part of the key: stores in separate
    schemas of one database are separate deployments and must not block each other."""
    digest = hashlib.blake2b(f"{LOCK_NAME}:{schema}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


class PostgresLeadership:
    """A session-level advisory lock, held by one connection kept open outside the pool.

    When the holder dies its socket closes, PostgreSQL ends the session and the lock is
    free. Server-side keepalives bound how long a vanished host (no FIN, no RST) keeps it:
    its session is dropped within about 5 + 2 * 3 s of silence."""

    SESSION_SETTINGS: ClassVar[tuple[str, ...]] = (
        "SET tcp_keepalives_idle = 5",
        "SET tcp_keepalives_interval = 2",
        "SET tcp_keepalives_count = 3",
    )

    def __init__(self, url: Any):
        parsed = make_url(url)
        # A down server answers "follower" in seconds instead of stalling the retrainer.
        connect_args = {} if "connect_timeout" in parsed.query else {"connect_timeout": 5}
        # NullPool: close() really closes, so the lock is never parked in a pool.
        self._engine: Engine = create_engine(parsed, poolclass=NullPool, connect_args=connect_args)
        self._conn: Connection | None = None
        self._key = 0
        self._held = False
        self._mutex = threading.Lock()  # the loop thread and a manual /retrain both ask

    @property
    def is_leader(self) -> bool:
        return self._held

    def try_acquire(self) -> bool:
        with self._mutex:
            if self._conn is not None and not self._alive():
                if self._held:
                    log.warning("leadership lost: the lock's connection broke")
                self._drop()  # start a fresh session, and try again below
            if self._held:
                return True
            try:
                return self._acquire()
            except SQLAlchemyError as exc:  # database unreachable: follow until it answers
                log.warning("leadership: cannot reach the database: %s", type(exc).__name__)
                self._drop()
                return False

    def _alive(self) -> bool:
        # A live session still holds its lock: nothing else can unlock it for us. (Calling
        # pg_try_advisory_lock again while held would stack a second hold on the key.)
        assert self._conn is not None
        try:
            self._conn.execute(text("SELECT 1"))
            return True
        except SQLAlchemyError:
            return False

    def _acquire(self) -> bool:
        if self._conn is None:
            # AUTOCOMMIT: the holder must not sit "idle in transaction" for hours.
            conn = self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
            self._conn = conn
            for statement in self.SESSION_SETTINGS:
                conn.execute(text(statement))
            self._key = _lock_key(conn.execute(text("SELECT current_schema()")).scalar_one())
        got = self._conn.execute(
            text("SELECT pg_try_advisory_lock(:key)"), {"key": self._key}
        ).scalar_one()
        self._held = bool(got)
        if self._held:
            log.info("leadership acquired (advisory lock %d)", self._key)
        return self._held

    def _drop(self) -> None:
        self._held = False
        if self._conn is not None:
            try:
                self._conn.invalidate()  # never hand a broken connection back
                self._conn.close()
            except SQLAlchemyError:
                pass
            self._conn = None

    def release(self) -> None:
        with self._mutex:
            if self._conn is not None:
                try:
                    # Unlock first: the server ends a closed session asynchronously, so a
                    # bare close would leave the lock held for a moment after we return.
                    if self._held:
                        self._conn.execute(
                            text("SELECT pg_advisory_unlock(:key)"), {"key": self._key}
                        )
                    self._conn.close()
                except SQLAlchemyError:
                    pass  # a broken session is ended by the server, and the lock with it
                self._conn = None
            self._held = False
            self._engine.dispose()


def make_leadership(engine: Engine) -> Leadership:
    url = engine.url
    if url.get_backend_name() == "postgresql":
        return PostgresLeadership(url)
    if url.get_backend_name() == "sqlite" and url.database and url.database != ":memory:":
        return FileLeadership(Path(f"{url.database}.leader"))
    return AlwaysLeader()

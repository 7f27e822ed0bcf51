"""Which training replica retrains which pool: leases in the store, so several replicas
share the pools (PostgreSQL), or one lock for all of them (SQLite, as before).

Every replica ingests any pool's rows; each pool is retrained by the one replica that
holds its lease. `for_pool(name)` gives the pool's Leadership (training_server.leadership),
so a pool's retrainer and live calibration ask it exactly as they ask the single lock.

PostgreSQL: a lease table (tables.pool_leases) with heartbeats (tables.training_replicas),
not an advisory lock per pool. Three things decide it:
- fencing: a lease's `epoch` grows with every new owner, and a publication checks, in the
  store, that this replica still holds the pool with the epoch it claimed and at least
  FENCE_MARGIN_S before expiry (`try_acquire`, asked just before a bundle is written). An
  advisory lock has no token to check, and a stalled holder cannot tell it lost one;
- balance: every replica sees every owner and the live replicas, so each takes its fair
  share (ceil(pools / live replicas)) and gives back what is over it when one joins;
- the owner is a name `pools`, /status and the dashboard can show.
Expiry is on the database's clock (now()), the one clock every replica shares. A replica
renews its leases and re-balances every `heartbeat_s` in a thread of its own (a long
retrain never starves it); a replica that dies stops renewing, and its pools are free
`ttl_s` later and claimed at the others' next heartbeat; one that stops gives them back
at once.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import ClassVar, Protocol

from sqlalchemy import Engine, delete, func, select, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import SQLAlchemyError

from training_server.leadership import Leadership
from training_server.tables import pool_leases, training_replicas

log = logging.getLogger(__name__)

# A publication needs this much of its lease left: writing a bundle takes well under it,
# so a lease cannot expire, and another replica claim the pool, mid-write.
FENCE_MARGIN_S = 2.0
NEVER = datetime(1970, 1, 1, tzinfo=UTC)  # the expiry of a lease nobody holds


class PoolLeases(Protocol):
    def for_pool(self, name: str) -> Leadership: ...
    def owner(self, name: str) -> str | None:
        """The replica retraining `name` as far as this replica knows (None: nobody)."""

    def start(self, open_pool: Callable[[str], None]) -> None:
        """Renew and re-balance in the background from now on; `open_pool` opens a pool
        another replica created when this one is given it to retrain."""

    def release(self) -> None:
        """Give every lease back (at stop)."""


class OneLock:
    """Every pool follows one Leadership: SQLite (replicas on one machine share a flock),
    an in-memory store, or a test."""

    def __init__(self, leadership: Leadership, replica: str):
        self.leadership, self.replica = leadership, replica

    def for_pool(self, name: str) -> Leadership:
        return self.leadership

    def owner(self, name: str) -> str | None:
        return self.replica if self.leadership.is_leader else None

    def start(self, open_pool: Callable[[str], None]) -> None:
        return None

    def release(self) -> None:
        self.leadership.release()


@dataclass(frozen=True)
class Held:
    epoch: int
    until: float  # time.monotonic() past which this replica stops counting on it


class PoolLease:
    """One pool's Leadership under PostgresLeases."""

    def __init__(self, leases: PostgresLeases, pool: str):
        self.leases, self.pool = leases, pool

    @property
    def is_leader(self) -> bool:
        return self.leases.holds(self.pool)

    def try_acquire(self) -> bool:
        """Held, checked in the store (the fence before a publication). The pool's
        retrainer asks every tick: a pool is offered for leasing from its first ask."""
        return self.leases.acquire(self.pool)

    def release(self) -> None:
        return None  # leases are given back together (PostgresLeases.release)


class PostgresLeases:
    # Names taken in this process: a second service in one process (tests, an embedding
    # program) is a replica of its own, "host:pid#1", while a deployment's one service per
    # process keeps the plain host:pid its retrains are recorded under.
    _taken: ClassVar[set[str]] = set()
    _taken_lock: ClassVar[threading.Lock] = threading.Lock()

    def __init__(self, engine: Engine, replica: str, *, ttl_s: float, heartbeat_s: float):
        with self._taken_lock:
            name, n = replica, 0
            while name in self._taken:
                n += 1
                name = f"{replica}#{n}"
            self._taken.add(name)
        self.engine, self.replica = engine, name
        self.ttl_s, self.heartbeat_s = ttl_s, heartbeat_s
        self._held: dict[str, Held] = {}  # replaced whole by each refresh
        self._owners: dict[str, str] = {}
        self._known: set[str] = set()  # pools whose retrainer asked: offered for leasing
        self._refreshed = -math.inf  # time.monotonic() of the last refresh
        self._lock = threading.Lock()  # one refresh at a time (heartbeat, a retrain's ask)
        self._open_pool: Callable[[str], None] = lambda name: None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    # what the pools ask --------------------------------------------------------------
    def for_pool(self, name: str) -> Leadership:
        return PoolLease(self, name)

    def holds(self, pool: str) -> bool:
        held = self._held.get(pool)
        return held is not None and time.monotonic() < held.until

    def owner(self, name: str) -> str | None:
        return self._owners.get(name) or None

    def acquire(self, pool: str) -> bool:
        """Whether this replica may retrain and publish `pool` now (fenced). A pool not
        held is re-balanced for at once when it is new here or the last heartbeat is
        older than one period, so a new pool (or a replica without the background
        thread) does not wait for the next heartbeat."""
        if not self.holds(pool):
            with self._lock:
                new = pool not in self._known
                self._known.add(pool)
            if new or time.monotonic() - self._refreshed >= self.heartbeat_s:
                self.refresh_safely()
        return self.fenced(pool)

    def fenced(self, pool: str) -> bool:
        """This replica holds `pool`, with the epoch it claimed, for FENCE_MARGIN_S more,
        by the store's own record; False as well when the store does not answer."""
        held = self._held.get(pool)
        if held is None or time.monotonic() >= held.until:
            return False
        margin = timedelta(seconds=FENCE_MARGIN_S)
        stmt = select(func.count()).where(
            pool_leases.c.pool == pool,
            pool_leases.c.owner == self.replica,
            pool_leases.c.epoch == held.epoch,
            pool_leases.c.expires_at > func.now() + margin,
        )
        try:
            with self.engine.connect() as conn:
                return bool(conn.execute(stmt).scalar_one())
        except SQLAlchemyError as exc:
            log.warning(
                "pool %s: lease not checked: cannot reach the database: %s",
                pool,
                type(exc).__name__,
            )
            return False

    # taking part ----------------------------------------------------------------------
    def start(self, open_pool: Callable[[str], None]) -> None:
        self._open_pool = open_pool
        self.refresh_safely()
        self._thread = threading.Thread(target=self._loop, name="pool-leases", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            self.refresh_safely()

    def refresh_safely(self) -> None:
        try:
            with self._lock:
                unopened = self.refresh()
        except SQLAlchemyError as exc:  # the store is away: the leases lapse on their own
            log.warning("pool leases: cannot reach the database: %s", type(exc).__name__)
            return
        for pool in unopened:  # outside the lock: opening one asks for its lease
            self._open_pool(pool)

    def refresh(self) -> list[str]:
        """Heartbeat, renew what is held, give back what is over the fair share, claim free
        pools up to it. The caller holds the lock. Returns the pools claimed that this
        replica does not keep yet (to be opened)."""
        started = self._refreshed = time.monotonic()
        ttl = timedelta(seconds=self.ttl_s)
        with self.engine.begin() as conn:
            conn.execute(
                pg_insert(training_replicas)
                .values(replica=self.replica, heartbeat_at=func.now())
                .on_conflict_do_update(
                    index_elements=["replica"], set_={"heartbeat_at": func.now()}
                )
            )
            known = sorted(self._known)
            if known:  # every pool a replica keeps has a lease row (free until claimed)
                conn.execute(
                    pg_insert(pool_leases)
                    .values(
                        [{"pool": p, "owner": "", "epoch": 0, "expires_at": NEVER} for p in known]
                    )
                    .on_conflict_do_nothing(index_elements=["pool"])
                )
            live = conn.execute(
                select(func.count()).where(training_replicas.c.heartbeat_at > func.now() - ttl)
            ).scalar_one()
            total = conn.execute(select(func.count()).select_from(pool_leases)).scalar_one()
            share = math.ceil(total / max(1, live))
            renewed = conn.execute(
                update(pool_leases)
                .where(pool_leases.c.owner == self.replica, pool_leases.c.expires_at > func.now())
                .values(expires_at=func.now() + ttl)
                .returning(pool_leases.c.pool, pool_leases.c.epoch)
            ).all()
            held = {str(pool): int(epoch) for pool, epoch in renewed}
            if len(held) > share:  # a replica joined: give back the excess
                extra = sorted(held)[share:]
                conn.execute(
                    update(pool_leases)
                    .where(pool_leases.c.pool.in_(extra), pool_leases.c.owner == self.replica)
                    .values(owner="", expires_at=func.now())
                )
                for pool in extra:
                    del held[pool]
            elif len(held) < share:
                free = (
                    select(pool_leases.c.pool)
                    .where(pool_leases.c.expires_at <= func.now())
                    .order_by(func.random())
                    .limit(share - len(held))
                    .with_for_update(skip_locked=True)
                    .scalar_subquery()
                )
                claimed = conn.execute(
                    update(pool_leases)
                    .where(pool_leases.c.pool.in_(free))
                    .values(
                        owner=self.replica,
                        epoch=pool_leases.c.epoch + 1,
                        expires_at=func.now() + ttl,
                    )
                    .returning(pool_leases.c.pool, pool_leases.c.epoch)
                ).all()
                held.update({str(pool): int(epoch) for pool, epoch in claimed})
            owners = conn.execute(
                select(pool_leases.c.pool, pool_leases.c.owner).where(
                    pool_leases.c.expires_at > func.now()
                )
            ).all()
        # Counted from before the renewal was asked: the store's expiry is later still.
        until = started + self.ttl_s - FENCE_MARGIN_S
        gained = set(held) - set(self._held)
        self._held = {pool: Held(epoch, until) for pool, epoch in held.items()}
        self._owners = {str(pool): str(owner) for pool, owner in owners}
        if gained:
            log.info("pool leases: now retraining %s (%d pools)", sorted(gained), len(held))
        return sorted(gained - set(known))  # their retrainers' first ask adds them to _known

    def release(self) -> None:
        """Stop renewing and give every lease back, so another replica claims them at its
        next heartbeat instead of after the expiry."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.heartbeat_s + 5.0)
        self._held = {}
        with self._taken_lock:
            self._taken.discard(self.replica)
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    update(pool_leases)
                    .where(pool_leases.c.owner == self.replica)
                    .values(owner="", expires_at=func.now())
                )
                conn.execute(
                    delete(training_replicas).where(training_replicas.c.replica == self.replica)
                )
        except SQLAlchemyError:  # the leases lapse on their own
            log.warning("pool leases not given back (store unreachable)", exc_info=True)


def make_pool_leases(
    engine: Engine, leadership: Leadership, replica: str, *, ttl_s: float, heartbeat_s: float
) -> PoolLeases:
    """Leases per pool on PostgreSQL, one lock for every pool elsewhere."""
    if engine.url.get_backend_name() == "postgresql":
        return PostgresLeases(engine, replica, ttl_s=ttl_s, heartbeat_s=heartbeat_s)
    return OneLock(leadership, replica)

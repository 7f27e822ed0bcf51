"""Pool leases on a real PostgreSQL schema: every pool retrained by exactly one replica, the
pools spread evenly and re-balanced when a replica joins or leaves, a dead replica's pools
taken over, and a publication fenced by the lease's epoch; on SQLite, one lock as before."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, text

from devkit.synthetic import synthetic_rows
from tests.training_server.conftest import OpenClient
from training_server.db import make_engine
from training_server.leadership import AlwaysLeader
from training_server.migrate import upgrade
from training_server.pool_leases import OneLock, PostgresLeases, make_pool_leases

pg = pytest.mark.postgres
POOLS = [f"pool-{i}" for i in range(10)]


@pytest.fixture
def engine(postgres_url: str) -> Iterator[Engine]:
    upgrade(postgres_url)
    engine = make_engine(postgres_url)
    yield engine
    engine.dispose()


@pytest.fixture
def replica(engine: Engine) -> Iterator[Callable[[str], PostgresLeases]]:
    made: list[PostgresLeases] = []

    def make(name: str) -> PostgresLeases:
        # heartbeat 0: every ask of a pool not held re-balances (no background thread here)
        leases = PostgresLeases(engine, name, ttl_s=30.0, heartbeat_s=0.0)
        made.append(leases)
        return leases

    yield make
    for leases in made:
        leases.release()


def ask_all(leases: PostgresLeases, pools: list[str] = POOLS) -> set[str]:
    """Every pool's retrainer asks once; the pools this replica may retrain."""
    return {pool for pool in pools if leases.for_pool(pool).try_acquire()}


def lapse(engine: Engine, replica: str) -> None:
    """`replica` died: its heartbeat and leases are past their expiry."""
    with engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE pool_leases SET expires_at = now() - interval '1 second' WHERE owner = :r"
            ),
            {"r": replica},
        )
        conn.execute(
            text(
                "UPDATE training_replicas SET heartbeat_at = now() - interval '1 hour' "
                "WHERE replica = :r"
            ),
            {"r": replica},
        )


@pg
def test_one_replica_retrains_every_pool_it_keeps(
    replica: Callable[[str], PostgresLeases],
) -> None:
    a = replica("a")
    assert ask_all(a) == set(POOLS)
    assert all(a.owner(pool) == "a" for pool in POOLS)
    assert all(a.for_pool(pool).is_leader for pool in POOLS)
    assert not a.for_pool("never-asked").is_leader


@pg
def test_a_replica_that_joins_gets_half_and_no_pool_has_two_owners(
    replica: Callable[[str], PostgresLeases],
) -> None:
    a, b = replica("a"), replica("b")
    assert ask_all(a) == set(POOLS)
    assert ask_all(b) == set()  # every pool is held; b's share waits for a to give back
    a.refresh_safely()  # a sees two live replicas: keeps its share, gives back the rest
    held_a = ask_all(a)
    held_b = ask_all(b)
    assert len(held_a) == len(held_b) == 5
    assert held_a.isdisjoint(held_b) and held_a | held_b == set(POOLS)
    a.refresh_safely()
    b.refresh_safely()
    assert {pool: a.owner(pool) for pool in POOLS} == {pool: b.owner(pool) for pool in POOLS}


@pg
def test_a_dead_replicas_pools_are_taken_over_and_its_publication_fenced(
    engine: Engine, replica: Callable[[str], PostgresLeases]
) -> None:
    a, b = replica("a"), replica("b")
    ask_all(a)
    b.refresh_safely()  # b is live
    a.refresh_safely()  # a gives back half
    held_a = ask_all(a)
    assert len(held_a) == 5
    lapse(engine, "a")  # a stops renewing: killed, or cut off from the store
    b.refresh_safely()
    assert ask_all(b) == set(POOLS)
    pool = sorted(held_a)[0]
    # a still counts on its lease locally, but the store says another epoch owns it now
    assert a.holds(pool)
    assert not a.for_pool(pool).try_acquire()


@pg
def test_a_replica_that_stops_gives_its_pools_back_at_once(
    replica: Callable[[str], PostgresLeases],
) -> None:
    a, b = replica("a"), replica("b")
    ask_all(a)
    ask_all(b)  # b is live
    a.refresh_safely()  # a gives back half
    assert len(ask_all(b)) == 5
    a.release()
    b.refresh_safely()  # no expiry to wait for: a gave them back and left
    assert ask_all(b) == set(POOLS)


def test_sqlite_and_memory_stores_keep_one_lock_for_every_pool(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'store.db'}")
    leader = AlwaysLeader()
    leases = make_pool_leases(engine, leader, "r", ttl_s=8.0, heartbeat_s=2.0)
    assert isinstance(leases, OneLock)
    assert leases.for_pool("a") is leader and leases.for_pool("b") is leader
    assert leases.owner("a") == "r"
    engine.dispose()


@pg
def test_the_owner_of_each_pool_is_listed(open_client: OpenClient, postgres_url: str) -> None:
    """One replica on PostgreSQL: a pool's first retrain claims its lease; GET /pools and
    /data/status name the replica that retrains it."""
    client = open_client(db_url=postgres_url)
    reply = client.post("/pools/p1/add_training_data_bulk", json={"entries": synthetic_rows(200)})
    assert reply.status_code == 202, reply.text
    assert client.get("/pools").json()["pools"][-1]["owner"] is None  # not asked for yet
    assert client.post("/pools/p1/retrain").json()["outcome"] == "ok"
    replica = client.get("/pools/p1/data/status").json()["trainer"]
    assert replica["is_leader"] and replica["owner"] == replica["id"]
    owners = {p["name"]: p["owner"] for p in client.get("/pools").json()["pools"]}
    assert owners["p1"] == replica["id"]

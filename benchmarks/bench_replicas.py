"""Training replicas that share the pools: two real training servers on one PostgreSQL
schema and one model directory, many pools, rows arriving all along, then one replica
SIGKILLed.

    .venv/bin/python -m benchmarks.bench_replicas [--pools 80] [--rows 1000] [--new-rows 100]
        [--interval 10] [--steady 60] [--after 40] [--replicas 2] [--lease-ttl 8]
        [--layout shared|store] [--watched 10] [--sync 1]

Starts `--replicas` training servers (processes, `python -m training_server`) on a fresh
schema of the PostgreSQL at 127.0.0.1:5432 (LATENCY_TEST_PG_URL overrides), fills `--pools`
pools with `--rows` rows each through them, then every `--interval` seconds sends each pool
`--new-rows` rows (spread over the live replicas). After `--steady` seconds it SIGKILLs
the first replica and goes on for `--after` seconds with the survivors (`--replicas 1`:
no kill, the steady part alone). One prediction
server serves every pool: `--layout shared` reads the replicas' shared model directory (a
ReadWriteMany volume); `--layout store` gives each replica a directory of its own, shares
bundles through the store (LATENCY_SHARE_BUNDLES_IN_STORE) and has the prediction server
mirror from a stand-in for a Kubernetes Service in front of the replicas
(devkit.service_proxy, MODEL_SYNC_INTERVAL_SEC=`--sync`: llm-d's chart layout). Prints:
- the pools each replica held (the leases) before the kill, and the split against even;
- the first pass: how long until every pool had its first model;
- per pool, the gaps between its successive retrains from then on (p50 / p90 / max);
- after the kill: how long until every pool the dead replica held was retrained by another
  (the slowest pool), and the retrain gaps of the survivors;
- rows acknowledged (202) against rows stored: none may be lost;
- whether any pool's published versions ever went back (they must not);
- the CPU each process used over the steady part (before the kill), the benchmark's own
  (its client and, with `store`, the Service stand-in) included;
- for `--watched` pools, how long after each publication the prediction server served
  it (p50 / p90 / max), and whether it ever served an older version after a newer one.
Every loop is bounded; only the servers it started are stopped, by PID. The schema is
dropped at the end.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import statistics
import tempfile
import time
import uuid
from collections import defaultdict
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text

from benchmarks.common import git_state, say
from benchmarks.process_cpu import cpu_times, steady_cpu
from benchmarks.served_watch import ServedWatch, figures, served_lag
from devkit.processes import ServerProcess, free_port
from devkit.service_proxy import ServiceProxy
from devkit.synthetic import synthetic_rows

PG_URL = os.environ.get("LATENCY_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
BATCH = 1_000
MAX_POOLS = 500


def post_rows(client: httpx.Client, url: str, pool: str, rows: list[dict[str, Any]]) -> int:
    """Rows acknowledged (202) by the replica at `url` for `pool`."""
    accepted = 0
    for i in range(0, len(rows), BATCH):
        part = rows[i : i + BATCH]
        reply = client.post(f"{url}/pools/{pool}/add_training_data_bulk", json={"entries": part})
        if reply.status_code == 202:
            accepted += len(part)
    return accepted


def retrains(engine: Any) -> list[tuple[str, datetime, str, str]]:
    """(pool, published at, trainer, version) of every successful retrain, oldest first; a
    retrain publishes as it ends (started_at + duration_s), on its replica's clock (the
    benchmark's: one machine)."""
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT pool, started_at, duration_s, trainer, version FROM retrains "
                "WHERE status = 'ok' ORDER BY id"
            )
        ).all()
    return [(str(p), s + timedelta(seconds=d), str(t), str(v)) for p, s, d, t, v in rows]


def gaps(
    rows: list[tuple[str, datetime, str, str]], since: datetime, until: datetime
) -> list[float]:
    """Seconds between successive retrains of each pool, both in [since, until]."""
    by_pool: dict[str, list[datetime]] = defaultdict(list)
    for pool, started, _, _ in rows:
        if since <= started <= until:
            by_pool[pool].append(started)
    out: list[float] = []
    for times in by_pool.values():
        out += [(b - a).total_seconds() for a, b in itertools.pairwise(times)]
    return out


def db_now(engine: Any) -> datetime:
    with engine.connect() as conn:
        now: datetime = conn.execute(text("SELECT now()")).scalar_one()
    return now


def owners(client: httpx.Client, url: str) -> dict[str, str | None]:
    listing = client.get(f"{url}/pools", timeout=10).json()["pools"]
    return {p["name"]: p.get("owner") for p in listing}


def main() -> None:
    args = parse_args()
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = create_engine(PG_URL)
    with admin.begin() as conn:
        conn.execute(text(f'CREATE SCHEMA "{schema}"'))
    url = f"{PG_URL}?options=-csearch_path%3D{schema}"
    engine = create_engine(url)
    names = [f"pool-{i:03d}" for i in range(args.pools)]
    servers: list[ServerProcess] = []
    with tempfile.TemporaryDirectory(prefix="bench-replicas-") as tmp:
        work = Path(tmp)
        env = {
            "LATENCY_DB_URL": url,
            "LATENCY_MODEL_DIR": str(work / "models"),
            "LATENCY_RETRAINING_INTERVAL_SEC": str(args.interval),
            "LATENCY_MAX_POOLS": str(args.pools + 1),
            "LATENCY_POOL_LEASE_TTL_SEC": str(args.lease_ttl),
            "LATENCY_TRAIN_THREADS": "1",
        }
        store = args.layout == "store"
        proxy: ServiceProxy | None = None
        try:
            for i in range(args.replicas):  # one after the other: the first migrates
                own = {"LATENCY_MODEL_DIR": str(work / f"models-{i}")} if store else {}
                share = {"LATENCY_SHARE_BUNDLES_IN_STORE": "true"} if store else {}
                server = ServerProcess(
                    "training_server",
                    free_port(),
                    {**env, **own, **share},
                    work / f"trainer-{i}.log",
                )
                servers.append(server.start())
            predictor_env = {
                "LATENCY_MODEL_DIR": str(work / ("predictor" if store else "models")),
                "LATENCY_MAX_POOLS": str(args.pools + 1),
                "MODEL_SYNC_INTERVAL_SEC": str(args.sync),
                "LATENCY_WORKERS": "1",
            }
            if store:
                proxy = ServiceProxy([s.port for s in servers]).start()
                predictor_env |= {"TRAINING_SERVER_URL": proxy.url}
            predictor = ServerProcess(
                "prediction_server", free_port(), predictor_env, work / "predictor.log"
            )
            servers.append(predictor.start())
            run(args, engine, names, servers[: args.replicas], predictor)
        finally:
            for server in servers:
                server.stop()
            if proxy is not None:
                proxy.close()
            engine.dispose()
            with admin.begin() as conn:
                conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
            admin.dispose()


def run(
    args: argparse.Namespace,
    engine: Any,
    names: list[str],
    servers: list[ServerProcess],
    predictor: ServerProcess,
) -> None:
    say(f"{git_state()}; {args.replicas} training replicas, {args.pools} pools x {args.rows} rows")
    accepted = 0
    live = list(servers)
    with httpx.Client(timeout=30) as client:
        t0 = time.monotonic()
        for i, pool in enumerate(names):
            target = live[i % len(live)]
            accepted += post_rows(client, target.url, pool, synthetic_rows(args.rows, seed=i))
        say(f"filled in {time.monotonic() - t0:.1f} s")
        started = db_now(engine)
        cpu_from = cpu_times([*servers, predictor])
        watch = ServedWatch(predictor.url, names[: args.watched]).start()
        killed_at: datetime | None = None
        victim_pools: set[str] = set()
        split: dict[str, int] = {}
        end = time.monotonic() + args.steady + args.after
        # one replica: nothing to take over, the steady part alone
        kill_at = time.monotonic() + args.steady if len(servers) > 1 else math.inf
        tick = 0
        while time.monotonic() < end:  # bounded by --steady + --after
            tick += 1
            t_tick = time.monotonic()
            if killed_at is None and t_tick >= kill_at:
                steady_cpu(cpu_from, cpu_times([*servers, predictor]))
                held = owners(client, live[0].url)  # every replica sees every lease
                held = {p: o for p, o in held.items() if p in names}  # not the empty default
                victim = servers[0]
                split = {
                    o: sum(1 for v in held.values() if v == o) for o in set(held.values()) if o
                }
                victim_name = _replica_name(client, victim)
                victim_pools = {p for p, o in held.items() if o == victim_name}
                victim.kill()
                killed_at = db_now(engine)
                live = servers[1:]
                say(
                    f"SIGKILL of {victim_name} (PID {victim.pid}) holding {len(victim_pools)} pools"
                )
            for i, pool in enumerate(names):
                rows = synthetic_rows(args.new_rows, seed=100_000 + tick * 1_000 + i)
                accepted += post_rows(client, live[(i + tick) % len(live)].url, pool, rows)
            time.sleep(max(0.0, args.interval - (time.monotonic() - t_tick)))
        time.sleep(args.interval)  # the last rows' retrains
        if killed_at is None:
            steady_cpu(cpu_from, cpu_times([*servers, predictor]))
        watch.close()
    report(engine, names, started, killed_at, victim_pools, split, accepted, args)
    served_lag(retrains(engine), watch)


def _replica_name(client: httpx.Client, server: ServerProcess) -> str:
    status = client.get(f"{server.url}/data/status", timeout=10).json()
    return str(status["trainer"]["id"])


def report(
    engine: Any,
    names: list[str],
    started: datetime,
    killed_at: datetime | None,
    victim_pools: set[str],
    split: dict[str, int],
    accepted: int,
    args: argparse.Namespace,
) -> None:
    rows = retrains(engine)
    even = len(names) / args.replicas
    say(
        "pools held before the kill: "
        + ", ".join(
            f"{o}: {n} ({n / even - 1:+.0%} against even)" for o, n in sorted(split.items())
        )
    )
    # steady once every pool has its first model: the first pass chooses every pool's
    firsts: dict[str, datetime] = {}
    for pool, when, _, _ in rows:
        firsts.setdefault(pool, when)
    steady_from = max((firsts[p] for p in names if p in firsts), default=started)
    unserved = [p for p in names if p not in firsts]
    say(
        f"first pass: every pool's first model {(steady_from - started).total_seconds():.1f} s "
        f"after the rows were in" + (f" ({len(unserved)} pools never)" if unserved else "")
    )
    say(f"steady retrain gaps: {figures(gaps(rows, steady_from, killed_at or db_now(engine)))}")
    if killed_at is not None:
        taken = {}
        for pool, when, _, _ in rows:
            if pool in victim_pools and when > killed_at and pool not in taken:
                taken[pool] = (when - killed_at).total_seconds()
        missing = victim_pools - set(taken)
        slowest = max(taken.values()) if taken else float("nan")
        say(
            f"after the kill: {len(taken)} of {len(victim_pools)} of its pools retrained by a "
            f"survivor, the slowest {slowest:.1f} s after the kill, median "
            f"{statistics.median(taken.values()) if taken else float('nan'):.1f} s"
            + (f"; never: {sorted(missing)[:5]}" if missing else "")
        )
        after = figures(gaps(rows, killed_at, db_now(engine)))
        say(f"survivors' retrain gaps after the kill: {after}")
    with engine.connect() as conn:
        stored = int(conn.execute(text("SELECT count(*) FROM samples")).scalar_one())
    say(f"rows acknowledged {accepted:,}, stored {stored:,}: {accepted - stored:,} lost")
    back = 0
    last: dict[str, str] = {}
    for pool, _, _, version in rows:
        if pool in last and version <= last[pool]:
            back += 1
        last[pool] = version
    say(f"published versions that went back: {back}")


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pools", type=int, default=80)
    parser.add_argument("--rows", type=int, default=1_000)
    parser.add_argument("--new-rows", type=int, default=100)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--steady", type=float, default=60.0)
    parser.add_argument("--after", type=float, default=40.0)
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--lease-ttl", type=float, default=8.0)
    parser.add_argument("--layout", choices=("shared", "store"), default="shared")
    parser.add_argument("--watched", type=int, default=10)
    parser.add_argument("--sync", type=float, default=1.0)
    args = parser.parse_args()
    if not 1 <= args.pools <= MAX_POOLS or args.replicas < 1:
        parser.error(f"--pools 1..{MAX_POOLS}, --replicas at least 1 (2 for the SIGKILL)")
    return args


if __name__ == "__main__":
    main()

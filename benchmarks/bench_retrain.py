"""Retrain time at a large store on one core, and how the training window adapts.

    .venv/bin/python -m benchmarks.bench_retrain [--stored 200000] [--retrains 4]
        [--interval 10] [--cores 1]

Fills a real SQLite store with `--stored` rows resampled from the H200 traces (retention
caps raised so all of them stay), pins this process to `--cores` CPUs with one fitting
thread per core, and runs `--retrains` retrains back to back, each after 1,000 new rows
(as the EPP would send in a second). Per retrain it prints the window limit in force, the
rows fitted per target, the wall time against the budget (half of `--interval`), and the
held-out coverage. The defaults are the shipped settings (LATENCY_MAX_TRAINING_WINDOW
100,000 per target).

Everything runs in this process on 127.0.0.1-free local files; every loop is bounded.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from benchmarks.common import allowed_cpus, pin, say
from benchmarks.trace_files import all_trace_rows, resample
from shared.schemas import TrainingEntry
from shared.settings import TrainingSettings
from shared.slot import prior_slot
from shared.targets import Target
from training_server.db import make_engine
from training_server.metrics import TrainingMetrics
from training_server.migrate import upgrade
from training_server.retrain.retrainer import Retrainer
from training_server.retrain_record import NO_TARGET
from training_server.store import SampleStore


def fill_store(
    workdir: Path, rows: list[dict[str, Any]], stored: int
) -> tuple[str, Engine, SampleStore, float]:
    """A fresh SQLite store of `stored` rows resampled from the traces: (url, engine, store,
    seconds the inserts took)."""
    url = f"sqlite:///{workdir / 'store.db'}"
    upgrade(url)
    engine = make_engine(url)
    store = SampleStore(engine, test_ratio=0.1)
    entries = [TrainingEntry.model_validate(r) for r in resample(rows, stored, seed=1)]
    t0 = time.perf_counter()
    for i in range(0, len(entries), 10_000):
        store.add_samples(entries[i : i + 10_000])
    return url, engine, store, time.perf_counter() - t0


def print_header(
    settings: TrainingSettings, retrainer: Retrainer, store: SampleStore, cores: int
) -> None:
    """The model, the budget, and how long one target's window takes to load alone."""
    window_t0 = time.perf_counter()
    store.window(Target.TTFT, test=False, limit=settings.max_training_window)
    window_s = time.perf_counter() - window_t0
    say(
        f"\n## retrain of both targets: {settings.model_type.value}, "
        f"{settings.n_estimators} trees, depth {settings.max_depth}, "
        f"{cores} core(s); budget {retrainer.window.budget_sec:.1f} s "
        f"(half of a {settings.retraining_interval_sec:g} s interval); one target's window "
        f"load alone {window_s:.2f} s"
    )
    say(
        f"{'#':>2} {'window':>8} {'ttft rows':>9} {'tpot rows':>9} {'seconds':>8} "
        f"{'in budget':>9} {'ttft cov':>8} {'tpot cov':>8}"
    )


def retrain_rounds(
    retrainer: Retrainer, store: SampleStore, rows: list[dict[str, Any]], retrains: int
) -> None:
    """`retrains` retrains back to back, each after 1,000 new rows; one line each."""
    extra = resample(rows, 1_000 * retrains, seed=2)
    for k in range(retrains):
        store.add_samples(
            [TrainingEntry.model_validate(r) for r in extra[k * 1_000 : (k + 1) * 1_000]]
        )
        outcome = retrainer.run_once()
        last = retrainer.state.last_success
        took = last.duration_s if last else 0.0
        ttft, tpot = (last.target(t) if last else NO_TARGET for t in (Target.TTFT, Target.TPOT))
        say(
            f"{k + 1:2d} {(last.window_limit if last else None) or 0:8d} "
            f"{ttft.train_samples or 0:9d} {tpot.train_samples or 0:9d} "
            f"{took:8.2f} {'yes' if took <= retrainer.window.budget_sec else 'NO':>9} "
            f"{ttft.coverage or 0:8.3f} {tpot.coverage or 0:8.3f}"
            f"  ({outcome})"
        )


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stored", type=int, default=200_000)
    parser.add_argument("--retrains", type=int, default=4)
    parser.add_argument("--interval", type=float, default=10.0)
    parser.add_argument("--cores", type=int, default=1)
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    cpus = allowed_cpus()[: args.cores]
    pin(os.getpid(), cpus)
    rows = all_trace_rows()
    with tempfile.TemporaryDirectory(prefix="bench-retrain-") as tmp:
        workdir = Path(tmp)
        url, engine, store, took = fill_store(workdir, rows, args.stored)
        say(f"stored {args.stored} rows in {took:.1f} s; pinned to CPU {cpus}")
        settings = TrainingSettings(
            db_url=url,
            model_dir=workdir / "models",
            train_threads=len(cpus),
            retraining_interval_sec=args.interval,
            max_training_data_size_per_bucket=10_000_000,
            max_test_data_size=1_000_000,
        )
        retrainer = Retrainer(settings, store, TrainingMetrics(), prior_slot(settings))
        print_header(settings, retrainer, store, len(cpus))
        retrain_rounds(retrainer, store, rows, args.retrains)
        engine.dispose()


if __name__ == "__main__":
    main()
